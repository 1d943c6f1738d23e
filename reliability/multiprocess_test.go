package reliability_test

const envChildRole = "JOBS_RELIABILITY_CHILD"

func runChild(role string) int { return 2 }
