module github.com/intentjobs/jobs/linearcheck

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/intentjobs/jobs v0.1.0
)
