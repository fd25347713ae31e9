/* Progressive enhancement of the participant pages. Everything works without
   this file: the ranking is a select per response, errors come from the server.
   Here the ranking becomes a list that can be dragged (SortableJS) or reordered
   with Move up / Move down buttons; every change is written back into the same
   selects, so the server receives exactly what it would receive without JS.
   Like the selects, the list starts unranked: the participant ranks by moving
   responses or confirms the order shown with "Keep this order". */
(function () {
  "use strict";

  function toArray(list) { return Array.prototype.slice.call(list); }

  var ANSWERS_CHANGED = "survey:answers-changed";

  // The ranking's texts, in the page's language: the server writes them as JSON into the
  // fieldset's data-texts; %(name)s placeholders are filled in here.

  function fill(text, values) {
    return text.replace(/%\((\w+)\)s/g, function (_, name) { return String(values[name]); });
  }

  function initRanking(fieldset) {
    var list = fieldset.querySelector("[data-rank-list]");
    var status = fieldset.querySelector("[data-rank-status]");
    if (!list) { return; }
    var texts = JSON.parse(fieldset.getAttribute("data-texts"));

    function rows() { return toArray(list.querySelectorAll("[data-rank-row]")); }
    function selectOf(row) { return row.querySelector("select"); }
    function label(row) { return fill(texts.response, { number: row.getAttribute("data-number") }); }

    // The ranking starts unranked: nothing is written into the selects until the participant
    // moves a response or confirms the order shown with "Keep this order". A ranking the
    // participant never touched cannot then pass for a deliberate one (position bias).
    var note = document.createElement("p");
    note.className = "rank-note";
    note.setAttribute("data-rank-note", "");
    var keep = document.createElement("button");
    keep.type = "button";
    keep.className = "keep-order";
    keep.setAttribute("data-keep-order", "");
    keep.textContent = texts.keep;
    keep.setAttribute("aria-describedby", "ranking-hint");

    function showState(ranked) {
      note.textContent = ranked ? texts.ranked : texts.unranked;
      fieldset.classList.toggle("is-ranked", ranked);
    }

    function updateButtons() {
      var all = rows();
      all.forEach(function (row, i) {
        row.querySelector("[data-move='up']").disabled = i === 0;
        row.querySelector("[data-move='down']").disabled = i === all.length - 1;
      });
    }

    // The server's errors about the ranks (a rank missing or given twice) no longer hold once the
    // list is a whole ranking: they leave the rows, and their lines leave the error summary.
    function clearRankErrors() {
      var summary = document.querySelector("[data-error-summary]");
      rows().forEach(function (row) {
        var select = selectOf(row);
        var message = row.querySelector(".error-message");
        row.classList.remove("has-error");
        select.removeAttribute("aria-invalid");
        if (message) {
          var described = (select.getAttribute("aria-describedby") || "").split(" ");
          select.setAttribute("aria-describedby", described.filter(function (id) { return id && id !== message.id; }).join(" "));
          message.parentNode.removeChild(message);
        }
        var link = summary && summary.querySelector("a[href='#" + select.id + "']");
        if (link) { link.closest("li").remove(); }
      });
      if (summary && !summary.querySelector("li")) { summary.remove(); }
    }

    function writeRanks() {
      rows().forEach(function (row, i) { selectOf(row).value = String(i + 1); });
      clearRankErrors();
      updateButtons();
      showState(true);
      // Setting a select's value fires no change event: tell the draft (below) the answers changed.
      fieldset.dispatchEvent(new CustomEvent(ANSWERS_CHANGED, { bubbles: true }));
    }

    function announce(row) {
      var rank = rows().indexOf(row) + 1;
      status.textContent = fill(texts.moved, { response: label(row), rank: rank, total: rows().length });
    }

    function moveTo(row, index) {
      var others = rows().filter(function (r) { return r !== row; });
      list.insertBefore(row, others[index] || null);
    }

    function addButtons(row) {
      var box = document.createElement("span");
      box.className = "move-buttons";
      [["up", texts.up], ["down", texts.down]].forEach(function (pair) {
        var button = document.createElement("button");
        button.type = "button";
        button.setAttribute("data-move", pair[0]);
        button.className = "move";
        button.appendChild(document.createTextNode(pair[1]));
        var hidden = document.createElement("span");
        hidden.className = "visually-hidden";
        hidden.textContent = " " + label(row);
        button.appendChild(hidden);
        box.appendChild(button);
      });
      row.appendChild(box);
    }

    // After a server-side error, keep the ranks the participant gave if they form a ranking;
    // anything less (nothing, or a partial ranking) stays as it came, to be completed.
    var given = rows().map(function (row) { return parseInt(selectOf(row).value, 10); });
    var complete = given.every(function (r) { return r >= 1; }) &&
      given.slice().sort().join() === rows().map(function (_, i) { return i + 1; }).join();
    if (complete) {
      rows().slice().sort(function (a, b) { return selectOf(a).value - selectOf(b).value; })
        .forEach(function (row) { list.appendChild(row); });
    }
    rows().forEach(addButtons);
    updateButtons();
    showState(complete);
    list.parentNode.insertBefore(note, list.nextSibling);
    note.parentNode.insertBefore(keep, note.nextSibling);

    keep.addEventListener("click", function () {
      writeRanks();
      var all = rows();
      status.textContent = fill(texts.kept, { first: label(all[0]), last: label(all[all.length - 1]) });
    });

    list.addEventListener("click", function (event) {
      var button = event.target.closest("button[data-move]");
      if (!button) { return; }
      var row = button.closest("[data-rank-row]");
      var index = rows().indexOf(row) + (button.getAttribute("data-move") === "up" ? -1 : 1);
      if (index < 0 || index >= rows().length) { return; }
      moveTo(row, index);
      writeRanks();
      // Moving a node drops its focus; keyboard users keep their place.
      var again = row.querySelector("button[data-move='" + button.getAttribute("data-move") + "']");
      (again.disabled ? row.querySelector("button[data-move]:not(:disabled)") : again).focus();
      announce(row);
    });

    list.addEventListener("change", function (event) {
      var select = event.target;
      if (select.tagName !== "SELECT") { return; }
      var row = select.closest("[data-rank-row]");
      var rank = parseInt(select.value, 10);
      if (!(rank >= 1)) {
        // "Choose a rank" again: a complete ranking stays whole (the list is the ranking).
        if (fieldset.classList.contains("is-ranked")) { writeRanks(); }
        return;
      }
      moveTo(row, rank - 1);
      writeRanks();
      select.focus();
      announce(row);
    });

    if (window.Sortable) {
      window.Sortable.create(list, {
        handle: ".drag-handle",
        draggable: "[data-rank-row]",
        animation: 0,
        // Mouse and touch events rather than native drag and drop: the same on every browser.
        forceFallback: true,
        onEnd: function (event) {
          // A drop where it started is no ranking; any move is.
          if (event.oldIndex === event.newIndex) { return; }
          writeRanks();
          announce(event.item);
        }
      });
    }
    fieldset.classList.add("is-enhanced");
  }

  // Drafts: what is entered on the page is kept on the server as it changes (after a short pause),
  // so that a reload, a return through the study link or another device finds it again: the
  // server fills the page in from it. A draft is never an answer; the page still counts only when
  // it is submitted, and without this script the page works as before (nothing is kept).
  function initDraft(form) {
    var url = form.getAttribute("data-draft-url");
    if (!url || !window.fetch || !window.FormData || !window.URLSearchParams) { return; }
    var PAUSE_MS = 700;
    var token = form.querySelector("[name=csrfmiddlewaretoken]");
    var timer = null;
    var sending = false;
    var stopped = false;
    var kept = entered();

    function entered() { return new URLSearchParams(new FormData(form)).toString(); }

    function post(body, keepalive) {
      return window.fetch(url, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        keepalive: keepalive,
        headers: { "Content-Type": "application/x-www-form-urlencoded", "X-CSRFToken": token ? token.value : "" }
      });
    }

    function send() {
      timer = null;
      var body = entered();
      if (stopped || body === kept) { return; }
      // One request at a time, so an older state never lands after a newer one.
      if (sending) { schedule(); return; }
      sending = true;
      post(body, false).then(function (response) {
        if (response.ok) { kept = body; }
        // The session ended, or the page is no longer the current one (submitted in another tab):
        // nothing more to keep here. Other refusals are retried with the next change.
        if (response.status === 403 || response.status === 409) { stopped = true; }
      }, function () { /* offline: the next change tries again */ }).then(function () { sending = false; });
    }

    function schedule() {
      window.clearTimeout(timer);
      timer = window.setTimeout(send, PAUSE_MS);
    }

    ["change", "input", ANSWERS_CHANGED].forEach(function (type) { form.addEventListener(type, schedule); });
    form.addEventListener("submit", function () {
      stopped = true;
      window.clearTimeout(timer);
    });
    // Leaving (a reload, closing the tab) during the pause: send now, in a request that outlives the page.
    window.addEventListener("pagehide", function () {
      if (timer === null || stopped) { return; }
      window.clearTimeout(timer);
      timer = null;
      var body = entered();
      if (body !== kept) { post(body, true).catch(function () {}); }
    });
  }

  // The sticky message must never cover the focused control (WCAG 2.2, 2.4.11):
  // keep the scroll padding equal to its height whenever it is sticky.
  function keepFocusClearOfScenario() {
    var scenario = document.querySelector("[data-scenario]");
    if (!scenario) { return; }
    function update() {
      var sticky = window.getComputedStyle(scenario).position === "sticky";
      document.documentElement.style.scrollPaddingTop = sticky ? (scenario.offsetHeight + 16) + "px" : "";
    }
    update();
    window.addEventListener("resize", update);
  }

  function focusErrorSummary() {
    var summary = document.querySelector("[data-error-summary]");
    if (!summary) { return; }
    summary.focus();
    // A link to a field focuses the field (a plain #fragment only scrolls) and shows
    // its question: the legend of its fieldset or its label.
    summary.addEventListener("click", function (event) {
      var link = event.target.closest("a[href^='#']");
      var field = link && document.getElementById(link.getAttribute("href").slice(1));
      if (!field || !field.focus) { return; }
      event.preventDefault();
      var context = field.closest("fieldset") || field.closest(".field") || field;
      context.scrollIntoView();
      field.focus({ preventScroll: true });
    });
  }

  document.documentElement.classList.add("js");
  toArray(document.querySelectorAll("[data-ranking]")).forEach(initRanking);
  toArray(document.querySelectorAll("form[data-draft-url]")).forEach(initDraft);
  keepFocusClearOfScenario();
  focusErrorSummary();
}());
