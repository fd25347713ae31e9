// Draw the results page's figures with the vendored plotly.js. Map data comes
// from our own static files (topojsonURL), so the maps render with no internet.
//
// Figures are drawn lazily: those in (or near) the window first, as soon as
// plotly is ready, the others as they scroll into view or, one at a time,
// whenever the browser is idle, so every figure is there before the reader
// gets to it without holding up the first. The page sends plotly's layout
// template once ("figures-template"); each figure gets it back here.
(function () {
  "use strict";
  var script = document.getElementById("results-script");
  if (!window.Plotly) { return; }
  function figuresIn(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : {};
  }
  var sources = { "data-figure": figuresIn("figures-data"), "data-metrics-figure": figuresIn("metrics-figures-data") };
  var templateNode = document.getElementById("figures-template");
  var template = templateNode ? JSON.parse(templateNode.textContent) : null;
  // Images are downloaded from the caption's buttons, one per format, so the mode bar keeps
  // only the zoom and pan tools (no camera that stands for two formats).
  var config = {
    displaylogo: false,
    responsive: true,
    topojsonURL: script.getAttribute("data-topojson-url"),
    modeBarButtonsToRemove: ["toImage", "select2d", "lasso2d"]
  };
  // On a phone the default side margins leave too little width: the legend wraps over the title.
  function narrow(el, layout) {
    if (el.clientWidth >= 600) { return layout; }
    var margin = Object.assign({}, layout.margin || {});
    if (margin.l === undefined || margin.l <= 80) { margin.l = 50; }
    margin.r = 10;
    // The title keeps to the top edge and a legend gets a second row's height above the plot.
    if (layout.legend && layout.legend.orientation === "h") { margin.t = (margin.t || 100) + 30; }
    var title = Object.assign({}, layout.title || {},
      { font: { size: 13 }, yref: "container", y: 1, yanchor: "top", pad: { t: 8 } });
    var legend = Object.assign({}, layout.legend || {}, { font: { size: 10 } });
    return Object.assign({}, layout, { margin: margin, title: title, legend: legend });
  }
  // A trace may say what changes on a phone (meta.narrow: e.g. the win grid's cells show marks).
  function narrowData(el, data) {
    if (el.clientWidth >= 600) { return data; }
    return data.map(function (trace) {
      return trace.meta && trace.meta.narrow ? Object.assign({}, trace, trace.meta.narrow) : trace;
    });
  }
  function figureOf(el) {
    for (var attribute in sources) {
      if (el.hasAttribute(attribute)) { return sources[attribute][el.getAttribute(attribute)]; }
    }
    return null;
  }
  var charts = Array.prototype.filter.call(document.querySelectorAll(".chart"), function (el) { return figureOf(el); });
  var drawn = [];
  // Draw one chart (once); returns plotly's promise.
  function draw(el) {
    var index = charts.indexOf(el);
    if (drawn[index]) { return drawn[index]; }
    var figure = figureOf(el);
    var layout = figure.layout.template || !template ? figure.layout : Object.assign({ template: template }, figure.layout);
    drawn[index] = Plotly.newPlot(el, narrowData(el, figure.data), narrow(el, layout), config);
    return drawn[index];
  }
  document.querySelectorAll("[data-download]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var chart = document.getElementById(button.getAttribute("data-chart"));
      var format = button.getAttribute("data-download");
      draw(chart).then(function () {
        Plotly.downloadImage(chart, { format: format, filename: chart.id, scale: format === "png" ? 2 : 1 });
      });
    });
  });
  if (!("IntersectionObserver" in window)) { charts.forEach(draw); return; }
  var idle = window.requestIdleCallback || function (callback) { return window.setTimeout(callback, 50); };
  function drawNextWhenIdle() {
    idle(function () {
      var next = charts.filter(function (el, index) { return !drawn[index]; })[0];
      if (!next) { return; }
      visible.unobserve(next);
      draw(next).then(drawNextWhenIdle, drawNextWhenIdle);
    });
  }
  // Charts that come into view are drawn one per task, in page order, so the browser
  // paints each as soon as it is drawn instead of after the last of them.
  var queue = [];
  function drawQueued() {
    var next = queue.shift();
    if (next) { draw(next); window.setTimeout(drawQueued, 0); }
  }
  var started = false;
  var visible = new IntersectionObserver(function (entries) {
    var idleQueue = queue.length === 0;
    entries.forEach(function (entry) {
      if (entry.isIntersecting) { visible.unobserve(entry.target); queue.push(entry.target); }
    });
    queue.sort(function (a, b) { return charts.indexOf(a) - charts.indexOf(b); });
    if (idleQueue) { drawQueued(); }
    if (!started) { started = true; drawNextWhenIdle(); }
  }, { rootMargin: "300px 0px" });
  charts.forEach(function (el) { visible.observe(el); });
}());
