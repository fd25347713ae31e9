// Draw the results page's figures with the vendored plotly.js. Map data comes
// from our own static files (topojsonURL), so the maps render with no internet.
(function () {
  "use strict";
  var script = document.getElementById("results-script");
  var dataNode = document.getElementById("figures-data");
  if (!dataNode || !window.Plotly) { return; }
  var figures = JSON.parse(dataNode.textContent);
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
  document.querySelectorAll("[data-figure]").forEach(function (el) {
    var figure = figures[el.getAttribute("data-figure")];
    if (figure) { Plotly.newPlot(el, figure.data, figure.layout, config); }
  });
}());
