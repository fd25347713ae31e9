// The results page of a run queued or still computing: ask for the run's
// status every second, and reload the page when it changed (a worker took the
// run, or a table landed; the browser keeps the scroll position), or say so
// when the run failed.
(function () {
  "use strict";
  var box = document.getElementById("run-progress");
  if (!box || !window.fetch) { return; }
  var url = box.getAttribute("data-status-url");
  var shown = box.getAttribute("data-pending");
  var shownStatus = box.getAttribute("data-status");
  var POLL_MS = 1000;
  function check() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (run) {
        if (!run) { window.setTimeout(check, POLL_MS * 3); return; }
        if (run.status === "failed") {
          var failed = box.querySelector("[data-run-failed]");
          failed.textContent = "The run failed: " + run.error;
          failed.hidden = false;
          return;
        }
        if (run.status !== shownStatus || run.pending.join(",") !== shown) { window.location.reload(); return; }
        window.setTimeout(check, POLL_MS);
      }, function () { window.setTimeout(check, POLL_MS * 3); });
  }
  window.setTimeout(check, POLL_MS);
}());
