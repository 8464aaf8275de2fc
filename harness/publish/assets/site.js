/* The suite pages of `harness publish`: charts (uPlot) and the comparison picker.
 *
 * The data comes from the page's <script type="application/json" id="site-data"> and is read with
 * JSON.parse; text reaches the page only through textContent (uPlot likewise uses textContent and
 * nodeValue), never innerHTML, so a name from a run file is always shown as text.
 * A flagged number (escaped sync, implausible, not comparable) goes into a series of its own,
 * drawn as red rings and named FLAGGED in the legend: never one of the normal points.
 */
"use strict";
(function () {
  var holder = document.getElementById("site-data");
  if (!holder) {
    return;
  }
  var data = JSON.parse(holder.textContent);
  var PALETTE = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#ff7f0e"];
  var FLAG = "#c00000";
  var charts = [];

  function groupName(point, by) {
    if (by === "machine") {
      return point.framework + " on " + point.machine;
    }
    if (by === "version") {
      return point.framework + " (" + point.version + ")";
    }
    return point.framework;
  }

  function empty(n) {
    var out = [];
    for (var i = 0; i < n; i++) {
      out.push(null);
    }
    return out;
  }

  // Whiskers: the interval of each median, dashed for flagged points.
  function drawIntervals(u, whiskers) {
    var ctx = u.ctx;
    var ratio = window.devicePixelRatio || 1;
    ctx.save();
    whiskers.forEach(function (w) {
      ctx.strokeStyle = w.color;
      ctx.lineWidth = (w.flagged ? 2 : 1.5) * ratio;
      ctx.setLineDash(w.flagged ? [4 * ratio, 3 * ratio] : []);
      w.lo.forEach(function (lo, i) {
        var hi = w.hi[i];
        if (lo === null || hi === null) {
          return;
        }
        var x = u.valToPos(i, "x", true);
        var y0 = u.valToPos(lo, "y", true);
        var y1 = u.valToPos(hi, "y", true);
        var cap = 4 * ratio;
        ctx.beginPath();
        ctx.moveTo(x, y0);
        ctx.lineTo(x, y1);
        ctx.moveTo(x - cap, y0);
        ctx.lineTo(x + cap, y0);
        ctx.moveTo(x - cap, y1);
        ctx.lineTo(x + cap, y1);
        ctx.stroke();
      });
    });
    ctx.restore();
  }

  function legendValue(texts) {
    return function (u, value, seriesIdx, idx) {
      return idx === null || idx === undefined || texts[idx] === null ? "--" : texts[idx];
    };
  }

  function chart(metric, element, by) {
    var n = data.runs.length;
    var xs = [];
    for (var i = 0; i < n; i++) {
      xs.push(i);
    }
    var groups = [];
    var byName = {};
    var low = Infinity;
    var high = -Infinity;
    metric.points.forEach(function (p) {
      var name = groupName(p, by);
      if (!Object.prototype.hasOwnProperty.call(byName, name)) {
        byName[name] = {
          name: name,
          normal: { y: empty(n), lo: empty(n), hi: empty(n), text: empty(n) },
          flagged: { y: empty(n), lo: empty(n), hi: empty(n), text: empty(n) },
        };
        groups.push(byName[name]);
      }
      var side = p.flags.length ? byName[name].flagged : byName[name].normal;
      side.y[p.x] = p.y;
      side.lo[p.x] = p.lo;
      side.hi[p.x] = p.hi;
      side.text[p.x] = p.flags.length ? p.text + " FLAGGED: " + p.flags.join("; ") : p.text;
      low = Math.min(low, p.lo, p.y);
      high = Math.max(high, p.hi, p.y);
    });
    var series = [{ label: "run", value: legendValue(data.runs.map(function (r) { return r.title; })) }];
    var columns = [xs];
    var whiskers = [];
    groups.forEach(function (g, k) {
      var color = PALETTE[k % PALETTE.length];
      series.push({
        label: g.name,
        stroke: color,
        width: 2,
        spanGaps: true,
        points: { show: true, size: 7, fill: color, stroke: color },
        value: legendValue(g.normal.text),
      });
      columns.push(g.normal.y);
      whiskers.push({ color: color, lo: g.normal.lo, hi: g.normal.hi, flagged: false });
      if (g.flagged.y.some(function (v) { return v !== null; })) {
        series.push({
          label: g.name + ": FLAGGED (not a normal point)",
          stroke: FLAG,
          width: 0,
          paths: function () { return null; },
          points: { show: true, size: 13, width: 2.5, fill: "#ffffff", stroke: FLAG },
          value: legendValue(g.flagged.text),
        });
        columns.push(g.flagged.y);
        whiskers.push({ color: FLAG, lo: g.flagged.lo, hi: g.flagged.hi, flagged: true });
      }
    });
    var pad = (high - low) * 0.08 || Math.abs(high) * 0.1 || 1;
    var step = Math.max(1, Math.ceil(n / 8));
    var options = {
      width: Math.max(320, (element.clientWidth || 900) - 10),
      height: 280,
      scales: {
        x: { time: false, range: [-0.5, n - 0.5] },
        y: { range: [low - pad, high + pad] },
      },
      axes: [
        {
          splits: function () { return xs; },
          values: function (u, splits) {
            return splits.map(function (k) { return k % step === 0 && data.runs[k] ? data.runs[k].tick : ""; });
          },
        },
        { label: metric.axis, size: 70 },
      ],
      series: series,
      hooks: { draw: [function (u) { drawIntervals(u, whiskers); }] },
    };
    return new uPlot(options, columns, element);
  }

  function drawAll() {
    var by = document.getElementById("series-by");
    var choice = by ? by.value : "framework";
    charts.forEach(function (c) { c.destroy(); });
    charts = [];
    data.metrics.forEach(function (metric, i) {
      var element = document.getElementById("chart-" + i);
      if (element) {
        charts.push(chart(metric, element, choice));
      }
    });
  }

  function compare() {
    var message = document.getElementById("compare-message");
    var a = Number(document.getElementById("run-a").value);
    var b = Number(document.getElementById("run-b").value);
    if (a === b) {
      message.textContent = "Choose two different runs.";
      return;
    }
    var key = Math.min(a, b) + "-" + Math.max(a, b);
    if (Object.prototype.hasOwnProperty.call(data.pairs, key)) {
      window.location.href = data.pairs[key];
      return;
    }
    message.textContent = "This pair was not compared when the site was published (too many runs: see --max-pairs); " +
      "run `harness compare` on the two run folders.";
  }

  var by = document.getElementById("series-by");
  if (by) {
    by.addEventListener("change", drawAll);
  }
  var go = document.getElementById("compare-go");
  if (go) {
    go.addEventListener("click", compare);
  }
  drawAll();
})();
