package jobs

// InterpretPostgres maps an error of PostgreSQL's driver as the store does
// for op.
func InterpretPostgres(op string, err error) error { return (&PostgresStore{}).interpret(op, err) }
