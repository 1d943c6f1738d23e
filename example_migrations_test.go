package jobs_test

import (
	"fmt"
	"io/fs"
	"log"

	"github.com/intentjobs/jobs"
)

// The schema for golang-migrate: the same SQL, named NNNN_name.up.sql.
// Hand it to golang-migrate's iofs source:
//
//	src, _ := iofs.New(fsys, ".")
//	mg, _ := migrate.NewWithSourceInstance("iofs", src, "pgx5://app@db/app")
//	err := mg.Up()
//
// then open the store with SkipMigrations.
func ExampleMigrationsFor() {
	fsys, err := jobs.MigrationsFor("postgres", jobs.GolangMigrate)
	if err != nil {
		log.Fatal(err)
	}
	names, _ := fs.Glob(fsys, "*.sql")
	fmt.Println(names[0])
	// Output:
	// 0001_init.up.sql
}
