// The console's only script: progressive enhancement of pages that work
// without it. It keeps live pages up to date (server-sent events tell
// when what the page shows has changed; the page is then read again and
// its main part swapped in place), and makes a confirmation form send once.
(function () {
  "use strict";

  // A form is sent once: a second click does nothing (the server acts
  // once anyway, by the form's idempotency key).
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (form.dataset.sent === "1") {
      ev.preventDefault();
      return;
    }
    form.dataset.sent = "1";
    Array.prototype.forEach.call(form.querySelectorAll("button[type=submit]"), function (b) { b.disabled = true; });
  });

  var main = document.getElementById("live");
  if (!main || !main.dataset.live || !window.EventSource) {
    return;
  }
  var status = document.getElementById("live-status");

  // busy reports whether the operator is writing in a form: the page is
  // then not replaced under their hands, and offers a reload instead.
  function busy() {
    var el = document.activeElement;
    if (el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT")) {
      return true;
    }
    return Array.prototype.some.call(main.querySelectorAll("textarea, input[type=text]"), function (t) {
      return t.value !== t.defaultValue;
    });
  }

  var refreshing = false;
  var pending = false;
  function refresh() {
    if (refreshing) {
      pending = true; // coalesce: one more read when this one ends
      return;
    }
    if (busy()) {
      status.textContent = "This page has changed. ";
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = "Reload";
      b.addEventListener("click", function () { window.location.reload(); });
      status.appendChild(b);
      status.hidden = false;
      return;
    }
    refreshing = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        if (fresh) {
          main.innerHTML = fresh.innerHTML;
          main.dataset.sig = fresh.dataset.sig || "";
          main.dataset.updated = String(Date.now());
        }
      })
      .catch(function () {})
      .then(function () {
        refreshing = false;
        if (pending) {
          pending = false;
          refresh();
        }
      });
  }

  var url = main.dataset.live + (main.dataset.live.indexOf("?") < 0 ? "?" : "&") + "sig=" + encodeURIComponent(main.dataset.sig || "");
  var source = new EventSource(url);
  source.addEventListener("change", refresh);
  source.addEventListener("open", function () { main.dataset.liveOpen = "1"; });
})();
