// Live dashboard: poll the JSON snapshot and update numbers and charts in place.
(function () {
  "use strict";
  var root = document.getElementById("dashboard");
  if (!root) { return; }
  var url = root.getAttribute("data-url");
  var INTERVAL_MS = 4000;

  function get(obj, path) {
    return path.split(".").reduce(function (o, k) { return o == null ? o : o[k]; }, obj);
  }

  function updateFields(data) {
    root.querySelectorAll("[data-field]").forEach(function (el) {
      var value = get(data, el.getAttribute("data-field"));
      el.textContent = value == null ? "–" : String(value);
    });
  }

  function drawCharts(data) {
    if (!window.Plotly) { return; }
    var cfg = { displaylogo: false, responsive: true };
    var hours = data.completions_by_hour || [];
    Plotly.react("chart-completions", [{ type: "bar", x: hours.map(function (h) { return h.hour; }),
      y: hours.map(function (h) { return h.n; }), name: "completions" }],
      { title: { text: "Completions per hour" }, margin: { t: 40, r: 10 }, height: 260 }, cfg);
    Plotly.react("chart-durations", [{ type: "histogram", x: data.durations.minutes, nbinsx: 20 }],
      { title: { text: "Minutes to complete" }, margin: { t: 40, r: 10 }, height: 260 }, cfg);
    // Counterbalancing: observed - expected per item and position, on a diverging scale centred on 0
    // whose range is at least +-2, so being off by one is a pale cell, not a stark stripe.
    var cov = data.position_coverage || [];
    var items = [], positions = [], cells = {};
    cov.forEach(function (r) {
      if (items.indexOf(r.item) < 0) { items.push(r.item); }
      if (positions.indexOf(r.position) < 0) { positions.push(r.position); }
      cells[r.item + "|" + r.position] = r;
    });
    positions.sort(function (a, b) { return a - b; });
    var limit = 2;
    cov.forEach(function (r) { limit = Math.max(limit, Math.abs(r.deviation)); });
    function grid(field) {
      return items.map(function (it) {
        return positions.map(function (p) { var c = cells[it + "|" + p]; return c ? c[field] : null; });
      });
    }
    var observed = grid("n"), expected = grid("expected");
    Plotly.react("chart-positions", [{ type: "heatmap", x: positions.map(function (p) { return "position " + p; }),
      y: items, z: grid("deviation"), zmid: 0, zmin: -limit, zmax: limit,
      // ColorBrewer RdBu: near-white at 0, so a cell off by a fraction of a showing stays pale.
      colorscale: [[0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1, "#2166ac"]],
      customdata: items.map(function (it, i) {
        return positions.map(function (p, j) { return [observed[i][j], expected[i][j]]; });
      }),
      colorbar: { title: { text: "observed −<br>expected" } },
      hovertemplate: "%{y} at %{x}<br>observed %{customdata[0]}<br>expected %{customdata[1]:.1f}" +
        "<br>deviation %{z:+.1f}<extra></extra>" }],
      { title: { text: "Counterbalancing: shown − expected" },
        height: Math.max(300, items.length * 9 + 80), margin: { t: 40, l: 70 } }, cfg);
  }

  // Coverage tables (studies that allocate blocks): rebuilt from the snapshot's rows.
  function fillRows(id, rows, cells) {
    var body = document.querySelector("#" + id + " tbody");
    if (!body || !rows) { return; }
    body.replaceChildren.apply(body, rows.map(function (row) {
      var tr = document.createElement("tr");
      cells(row).forEach(function (value) {
        var td = document.createElement("td");
        td.textContent = value == null ? "–" : String(value);
        tr.appendChild(td);
      });
      return tr;
    }));
  }

  function drawCoverage(data) {
    var cov = data.coverage;
    if (!cov || !cov.judgements_per_block) { return; }
    fillRows("coverage-levels", cov.levels, function (l) { return [l.judged, l.blocks]; });
    if (cov.gaps.length) {
      fillRows("coverage-gaps", cov.gaps, function (g) { return [g.block_id, g.scenario, g.judged, g.allocated, g.missing]; });
    }
  }

  function render(data) {
    updateFields(data);
    drawCoverage(data);
    drawCharts(data);
    if (data.run_html !== undefined) { document.getElementById("run-status").innerHTML = data.run_html; }
    document.getElementById("updated-at").textContent = "Updated " + new Date().toLocaleTimeString();
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) { if (data) { render(data); } })
      .catch(function () { /* a missed update is retried on the next tick */ })
      .finally(function () { window.setTimeout(poll, INTERVAL_MS); });
  }

  var initial = document.getElementById("dashboard-initial");
  if (initial) { render(JSON.parse(initial.textContent)); }
  window.setTimeout(poll, INTERVAL_MS);
}());
