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
  var config = {
    displaylogo: false,
    responsive: true,
    topojsonURL: script.getAttribute("data-topojson-url"),
    toImageButtonOptions: { format: "png", scale: 2 },
    modeBarButtonsToAdd: [{
      name: "Download SVG",
      icon: Plotly.Icons.camera,
      click: function (gd) { Plotly.downloadImage(gd, { format: "svg", filename: gd.id }); }
    }]
  };
  function draw(attribute, source) {
    document.querySelectorAll("[" + attribute + "]").forEach(function (el) {
      var figure = source[el.getAttribute(attribute)];
      if (figure) { Plotly.newPlot(el, figure.data, figure.layout, config); }
    });
  }
  draw("data-figure", figures);
  draw("data-metrics-figure", metricsFigures);
}());
