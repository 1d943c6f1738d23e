// Package e2e holds end-to-end tests that drive a real browser (headless
// Chromium, through chromedp) against the example HTTP API and the
// operator's console it mounts. It is a module of its own so that the
// library does not depend on a browser driver.
//
//	cd e2e && go test -race ./...
//
// The tests skip when no Chromium is installed, unless
// JOBS_TEST_REQUIRE_BROWSER=1, which CI sets after installing Debian's
// chromium package. JOBS_TEST_CHROMIUM names a browser binary explicitly,
// and JOBS_TEST_SCREENSHOTS a directory to save screenshots in. The
// console's screenshots in docs/console are rewritten by
//
//	go test -run ConsoleScreenshots -update
package e2e
