package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/mysql"
)

// Open connects with a DSN of go-sql-driver/mysql, sets up each session
// as the store needs, and applies the schema.
func ExampleOpen() {
	ctx := context.Background()
	s, err := mysql.Open(ctx, "app:secret@tcp(db:3306)/app")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	job, created, err := m.Submit(ctx, jobs.SubmitRequest{
		Owner: "user-42", Key: "order-1001", Kind: "charge", Provider: "acme",
		Params: json.RawMessage(`{"amount":1200,"currency":"eur"}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Println(job.ID, created)
}

// New takes the application's own handle, whose sessions must be strict
// (the servers' default sql_mode is); interpolateParams saves two round
// trips per statement. The caller keeps ownership of db.
func ExampleNew() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app:secret@tcp(db:3306)/app?interpolateParams=true&parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	s, err := mysql.New(ctx, db, mysql.SkipMigrations())
	if err != nil {
		log.Fatal(err) // ErrNotStrict, or a *jobs.StorageError (kind schema: run the migrations first)
	}
	m, err := jobs.New(s, jobs.Options{})
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	// ... the application's own writes in tx ...
	if _, _, err := m.SubmitTx(ctx, tx, jobs.SubmitRequest{Owner: "user-42", Key: "order-1001", Kind: "charge",
		Provider: "acme", Params: json.RawMessage(`{}`)}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}
