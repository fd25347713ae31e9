// Draw the results page's figures with the vendored plotly.js. Map data comes
// from our own static files (topojsonURL), so the maps render with no internet.
(function () {
  "use strict";
  var script = document.getElementById("results-script");
  if (!window.Plotly) { return; }
  function figuresIn(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : {};
  }
  var figures = figuresIn("figures-data");
  var metricsFigures = figuresIn("metrics-figures-data");
  // Images are downloaded from the caption's buttons, one per format, so the mode bar keeps
  // only the zoom and pan tools (no camera that stands for two formats).
  var config = {
    displaylogo: false,
    responsive: true,
    topojsonURL: script.getAttribute("data-topojson-url"),
    modeBarButtonsToRemove: ["toImage", "select2d", "lasso2d"]
  };
  document.querySelectorAll("[data-download]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var chart = document.getElementById(button.getAttribute("data-chart"));
      var format = button.getAttribute("data-download");
      Plotly.downloadImage(chart, { format: format, filename: chart.id, scale: format === "png" ? 2 : 1 });
    });
  });
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
  function draw(attribute, source) {
    document.querySelectorAll("[" + attribute + "]").forEach(function (el) {
      var figure = source[el.getAttribute(attribute)];
      if (figure) { Plotly.newPlot(el, figure.data, narrow(el, figure.layout), config); }
    });
  }
  draw("data-figure", figures);
  draw("data-metrics-figure", metricsFigures);
}());
