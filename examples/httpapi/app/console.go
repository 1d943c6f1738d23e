package app

import (
	"net/http"
	"slices"

	"github.com/intentjobs/jobs/console"
)

// ConsoleAccess is the console's authorization with the demo's
// authentication (Owner): the owners named in operators run the console
// as operators over every owner's jobs; anyone else signed in reads their
// own jobs only. A real service would ask its own identity provider.
func ConsoleAccess(operators ...string) func(r *http.Request) (console.Principal, error) {
	return func(r *http.Request) (console.Principal, error) {
		owner, ok := Owner(r)
		if !ok {
			return console.Principal{}, console.ErrUnauthenticated
		}
		if slices.Contains(operators, owner) {
			return console.Principal{Actor: owner, Role: console.RoleOperator}, nil
		}
		return console.Principal{Actor: owner, Role: console.RoleViewer, Owners: []string{owner}}, nil
	}
}

// serveSignIn is the demo's sign-in: /sign-in?as=NAME makes NAME the
// browser's owner (the cookie that Owner reads), then opens the console.
// A real service has its own sign-in.
func (a *App) serveSignIn(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("as")
	if name == "" || len(name) > 64 {
		http.Error(w, "sign in with ?as=NAME", http.StatusBadRequest)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: OwnerCookie, Value: name, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}
