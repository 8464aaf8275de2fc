/* The charts of `harness publish` (uPlot): a suite page's history and comparison picker, and a run
 * page's pictures (learning curves, roofline, an inference run's throughput against batch size, sample
 * timelines: harness/publish/run_charts.py, inference_charts.py).
 *
 * The data comes from the page's <script type="application/json" id="site-data"> and is read with
 * JSON.parse; text reaches the page only through textContent (uPlot likewise uses textContent and
 * nodeValue) or the canvas, never innerHTML, so a name from a run file is always shown as text.
 * A flagged number (escaped sync, implausible, not comparable) goes into a series of its own, drawn
 * in its framework's own colour and shape, ringed in red (or a dashed line with red-ringed points),
 * and named FLAGGED in the legend: never a normal point, and never a red that hides which framework
 * it is. A legend's swatch is filled with its series' colour; a value shows only under the cursor.
 * Every title, axis label and legend label is written by the Python side; this file only draws.
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

  // `point.series` is the framework with its code path where the metric names one ("pytorch (eager)").
  function groupName(point, by) {
    if (by === "machine") {
      return point.series + " on " + point.machine;
    }
    if (by === "version") {
      return point.series + " (" + point.version + ")";
    }
    return point.series;
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

  // Change points (`harness history`): a dashed line between the last run of the old level and
  // the first of the new one, red where the level got worse; the text is in the table below.
  function drawChanges(u, changes, column) {
    var ctx = u.ctx;
    var ratio = window.devicePixelRatio || 1;
    ctx.save();
    (changes || []).forEach(function (c) {
      if (!column.has(c.x)) {
        return;
      }
      var x = u.valToPos(column.get(c.x) - 0.5, "x", true);
      ctx.strokeStyle = c.worse ? FLAG : "#006400";
      ctx.lineWidth = 1.5 * ratio;
      ctx.setLineDash([6 * ratio, 4 * ratio]);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    });
    ctx.restore();
  }

  // Nothing (uPlot's "--") where the cursor is on no point: a legend is its swatches and names.
  function legendValue(texts) {
    return function (u, value, seriesIdx, idx) {
      return idx === null || idx === undefined || texts[idx] === null ? "" : texts[idx];
    };
  }

  // Swatches filled with each series' colour, ringed in red for a flagged series.
  function swatches(series) {
    return {
      width: function (u, i) { return series[i].flagged ? 3 : 1; },
      stroke: function (u, i) { return series[i].flagged ? FLAG : series[i].colour || null; },
      fill: function (u, i) { return series[i].colour || null; },
    };
  }

  function chart(metric, element, by) {
    // The x axis has the runs with a point on this chart only: no empty slot for another workload's run.
    var positions = metric.runs;
    var n = positions.length;
    var column = new Map();
    var xs = [];
    for (var i = 0; i < n; i++) {
      xs.push(i);
      column.set(positions[i], i);
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
          colour: p.colour,
          normal: { y: empty(n), lo: empty(n), hi: empty(n), text: empty(n) },
          flagged: { y: empty(n), lo: empty(n), hi: empty(n), text: empty(n) },
        };
        groups.push(byName[name]);
      }
      var side = p.flags.length ? byName[name].flagged : byName[name].normal;
      var at = column.get(p.x);
      side.y[at] = p.y;
      side.lo[at] = p.lo;
      side.hi[at] = p.hi;
      side.text[at] = p.flags.length ? p.text + " FLAGGED: " + p.flags.join("; ") : p.text;
      low = Math.min(low, p.lo, p.y);
      high = Math.max(high, p.hi, p.y);
    });
    var series = [{ label: "run", value: legendValue(positions.map(function (k) { return data.runs[k].title; })) }];
    var columns = [xs];
    var whiskers = [];
    groups.forEach(function (g, k) {
      // Series per framework keep the framework's colour (the same as in the run pages and PNGs);
      // per machine or version, one framework has several series, told apart by the palette.
      var color = by === "framework" && g.colour ? g.colour : PALETTE[k % PALETTE.length];
      series.push({
        label: g.name,
        stroke: color,
        width: 2,
        spanGaps: true,
        points: { show: true, size: 7, fill: color, stroke: color },
        value: legendValue(g.normal.text),
        colour: color,
      });
      columns.push(g.normal.y);
      whiskers.push({ color: color, lo: g.normal.lo, hi: g.normal.hi, flagged: false });
      if (g.flagged.y.some(function (v) { return v !== null; })) {
        // The framework's own colour, ringed in red: with every point flagged, still its own series.
        series.push({
          label: g.name + ": FLAGGED (not a normal point)",
          stroke: color,
          width: 0,
          paths: function () { return null; },
          points: { show: true, size: 13, width: 3, fill: color, stroke: FLAG },
          value: legendValue(g.flagged.text),
          colour: color,
          flagged: true,
        });
        columns.push(g.flagged.y);
        whiskers.push({ color: color, lo: g.flagged.lo, hi: g.flagged.hi, flagged: true });
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
            return splits.map(function (k) { return k % step === 0 && k < n ? data.runs[positions[k]].tick : ""; });
          },
        },
        { label: metric.axis, size: 70 },
      ],
      series: series,
      legend: { markers: swatches(series) },
      hooks: { draw: [function (u) { drawIntervals(u, whiskers); drawChanges(u, metric.changes, column); }] },
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
    var unmeasured = [a, b].filter(function (k) { return !data.runs[k].measured; });
    if (unmeasured.length) {
      message.textContent = "Run " + (unmeasured[0] + 1) + " measured nothing (no job produced numbers): " +
        "there is nothing to compare.";
      return;
    }
    if (data.runs[a].workload !== data.runs[b].workload) {
      message.textContent = "These runs measured different work (another size, precision, device or dataset): " +
        "they are never compared.";
      return;
    }
    if (Object.prototype.hasOwnProperty.call(data.pairs, key)) {
      window.location.href = data.pairs[key];
      return;
    }
    message.textContent = "This pair was not compared when the site was published (too many runs: see --max-pairs); " +
      "run `harness compare` on the two run folders.";
  }

  // ---------------------------------------------------------------------------------------------
  // Run pages: learning curves, roofline, sample timelines.

  function notNull(v) {
    return v !== null && v !== undefined;
  }

  function fmt(v, digits) {
    return notNull(v) ? Number(v).toPrecision(digits || 3) : "--";
  }

  // "#rrggbb" at opacity `a`.
  function faded(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + ((n >> 16) & 255) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  // The sorted distinct x values of several curves: uPlot draws every series against one x array.
  function mergedXs(lists) {
    var seen = new Set();
    lists.forEach(function (xs) {
      xs.forEach(function (x) {
        if (notNull(x)) {
          seen.add(x);
        }
      });
    });
    return Array.from(seen).sort(function (a, b) { return a - b; });
  }

  // One series' y values placed against the merged x array (null where it has no point).
  function placed(xs, px, py) {
    var at = new Map();
    xs.forEach(function (x, i) { at.set(x, i); });
    var out = empty(xs.length);
    px.forEach(function (x, k) {
      if (notNull(x) && notNull(py[k]) && at.has(x)) {
        out[at.get(x)] = py[k];
      }
    });
    return out;
  }

  function chartWidth(element) {
    return Math.max(320, Math.min(element.clientWidth || 900, 1100) - 10);
  }

  // A swatch's edge: a points-only series' point edge, else its line's colour.
  function markerEdge(s) {
    var edge = s.width === 0 && s.points ? s.points.stroke : s.stroke;
    return edge || s.marker || null;
  }

  // Legend markers filled with the series' own colour (uPlot's default is an outline, and an empty
  // box for a series drawn as points only), ringed in red for a flagged series.
  function options(spec, element, series, extra) {
    var fills = series.map(function (s) { return s.marker || null; });
    var base = {
      title: spec.title,
      width: chartWidth(element),
      height: 330,
      series: series,
      legend: {
        markers: {
          width: function (u, i) { return series[i].flagged ? 3 : 2; },
          dash: function (u, i) { return u.series[i].dash ? "dashed" : "solid"; },
          stroke: function (u, i) { return series[i].flagged ? FLAG : markerEdge(series[i]); },
          fill: function (u, i) { return fills[i]; },
        },
      },
    };
    Object.keys(extra).forEach(function (k) { base[k] = extra[k]; });
    return base;
  }

  function withUnit(unit, digits) {
    return function (u, v) {
      return notNull(v) ? fmt(v, digits) + unit : "";
    };
  }

  // `opts.flagged`: the same line in its own colour, its points ringed in red.
  function lineSeries(label, colour, opts) {
    return {
      label: label,
      stroke: colour,
      width: opts.width,
      dash: opts.dash,
      spanGaps: true,
      points: opts.flagged
        ? { show: true, size: opts.size + 4, width: 2, fill: colour, stroke: FLAG }
        : { show: true, size: opts.size, fill: colour, stroke: colour },
      value: opts.value,
      marker: colour,
      flagged: Boolean(opts.flagged),
    };
  }

  // A log axis from the decade at or below `low` to the one at or above `high`.
  function decades(low, high) {
    var lo = Math.pow(10, Math.floor(Math.log10(low)));
    var hi = Math.pow(10, Math.ceil(Math.log10(high)));
    return [lo, hi > lo ? hi : lo * 10];
  }

  // A text on the canvas, on a white box so a line under it does not hide it.
  function canvasLabel(ctx, text, x, y, colour, ratio) {
    ctx.font = 11 * ratio + "px system-ui, sans-serif";
    var w = ctx.measureText(text).width;
    ctx.fillStyle = "rgba(255,255,255,0.85)";
    ctx.fillRect(x - 2 * ratio, y - 11 * ratio, w + 4 * ratio, 14 * ratio);
    ctx.fillStyle = colour;
    ctx.fillText(text, x, y);
    return w;
  }

  // The plot area only, with text left-aligned on its baseline (uPlot leaves the axes' alignment set).
  function clipToPlot(u) {
    var ctx = u.ctx;
    ctx.save();
    ctx.textAlign = "left";
    ctx.textBaseline = "alphabetic";
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    return ctx;
  }

  // The min-max band of each framework's rounds, under the lines.
  function drawBands(u, bands) {
    var ctx = clipToPlot(u);
    bands.forEach(function (b) {
      var run = [];
      function flush() {
        if (run.length > 1) {
          ctx.beginPath();
          run.forEach(function (p, i) {
            var x = u.valToPos(p[0], "x", true);
            var y = u.valToPos(p[2], "y", true);
            if (i === 0) {
              ctx.moveTo(x, y);
            } else {
              ctx.lineTo(x, y);
            }
          });
          for (var i = run.length - 1; i >= 0; i--) {
            ctx.lineTo(u.valToPos(run[i][0], "x", true), u.valToPos(run[i][1], "y", true));
          }
          ctx.closePath();
          ctx.fillStyle = faded(b.colour, 0.18);
          ctx.fill();
        }
        run = [];
      }
      b.xs.forEach(function (x, k) {
        if (notNull(x) && notNull(b.lo[k]) && notNull(b.hi[k])) {
          run.push([x, b.lo[k], b.hi[k]]);
        } else {
          flush();
        }
      });
      flush();
    });
    ctx.restore();
  }

  // Each band's median line, epoch after epoch.
  function drawMedians(u, bands) {
    var ratio = window.devicePixelRatio || 1;
    var ctx = clipToPlot(u);
    ctx.lineWidth = 3 * ratio;
    ctx.lineJoin = "round";
    bands.forEach(function (b) {
      ctx.strokeStyle = b.colour;
      ctx.setLineDash(b.dash.map(function (d) { return d * ratio; }));
      ctx.beginPath();
      var drawing = false;
      b.xs.forEach(function (x, k) {
        if (!notNull(x) || !notNull(b.mid[k])) {
          drawing = false;
          return;
        }
        var px = u.valToPos(x, "x", true);
        var py = u.valToPos(b.mid[k], "y", true);
        if (drawing) {
          ctx.lineTo(px, py);
        } else {
          ctx.moveTo(px, py);
          drawing = true;
        }
      });
      ctx.stroke();
    });
    ctx.restore();
  }

  function drawTarget(u, target, label) {
    var ratio = window.devicePixelRatio || 1;
    var y = u.valToPos(target, "y", true);
    var ctx = clipToPlot(u);
    ctx.strokeStyle = "#555555";
    ctx.lineWidth = 1.5 * ratio;
    ctx.setLineDash([6 * ratio, 4 * ratio]);
    ctx.beginPath();
    ctx.moveTo(u.bbox.left, y);
    ctx.lineTo(u.bbox.left + u.bbox.width, y);
    ctx.stroke();
    // At the left end: accuracy curves start low and loss curves high, away from their targets,
    // so the label rarely sits on one there.
    canvasLabel(ctx, label, u.bbox.left + 8 * ratio, y - 5 * ratio, "#444444", ratio);
    ctx.restore();
  }

  function learningChart(spec, learning) {
    var element = document.getElementById(spec.id);
    if (!element) {
      return null;
    }
    var field = spec.field;
    // The chart's own unit: " %" for test accuracy, none for a loss (train or validation).
    var unit = notNull(spec.unit) ? spec.unit : "";
    var xs = mergedXs(learning.curves.map(function (c) { return c.seconds; })
      .concat(learning.bands.map(function (b) { return b.seconds; })));
    var series = [{ label: "training time", value: withUnit(" s", 3) }];
    var columns = [xs];
    var bands = [];
    learning.curves.forEach(function (c) {
      if (!c[field].some(notNull)) {
        return;
      }
      var colour = c.thin ? faded(c.colour, 0.55) : c.colour;
      series.push(lineSeries(c.label, colour, {
        width: c.thin ? 1 : 2,
        size: c.thin ? 4 : 6,
        dash: c.flagged ? [6, 4] : undefined,
        flagged: c.flagged,
        value: withUnit(unit, 4),
      }));
      columns.push(placed(xs, c.seconds, c[field]));
    });
    learning.bands.forEach(function (b) {
      var spread = b[field];
      var lo = spread.map(function (v) { return v ? v[0] : null; });
      var mid = spread.map(function (v) { return v ? v[1] : null; });
      var hi = spread.map(function (v) { return v ? v[2] : null; });
      if (!mid.some(notNull)) {
        return;
      }
      // The median's seconds need not grow with the epoch (a round that stopped early at its
      // target leaves the later epochs to the others), so its line is drawn in epoch order by
      // drawMedians; the series holds its points, legend and hover.
      var median = lineSeries(b.label, b.colour, {
        width: 3,
        size: 7,
        dash: b.flagged ? [8, 4] : undefined,
        flagged: b.flagged,
        value: withUnit(unit, 4),
      });
      median.paths = function () { return null; };
      series.push(median);
      columns.push(placed(xs, b.seconds, mid));
      bands.push({ colour: b.colour, xs: b.seconds, lo: lo, mid: mid, hi: hi, dash: b.flagged ? [8, 4] : [] });
    });
    // The target is in the evaluated measure (test accuracy, or a language model's validation loss).
    var target = field === learning.target_field && notNull(learning.target) ? learning.target : null;
    if (target !== null) {
      series.push({
        label: learning.target_label,
        stroke: "#555555",
        width: 1.5,
        dash: [6, 4],
        paths: function () { return null; }, // drawn across the whole plot by drawTarget
        points: { show: false },
        value: function () { return target + unit; },
      });
      columns.push(xs.map(function () { return target; }));
    }
    var x = { time: false };
    if (learning.log_x && xs.length) {
      // Whole decades: uPlot's log-axis ticks step from the range's low end, and from one that is
      // not a power of ten (0.0125 s / 1.3) they rounded to 0 and looped until "Invalid array length".
      var span = decades(xs[0], xs[xs.length - 1]);
      x = { time: false, distr: 3, range: function () { return span; } };
    }
    var opts = options(spec, element, series, {
      scales: { x: x },
      axes: [{ label: spec.x }, { label: spec.y, size: 60 }],
      hooks: {
        drawClear: [function (u) { drawBands(u, bands); }],
        draw: [function (u) {
          drawMedians(u, bands);
          if (target !== null) {
            drawTarget(u, target, learning.target_label);
          }
        }],
      },
    });
    return new uPlot(opts, columns, element);
  }

  function roofAt(roof, x) {
    return notNull(roof.bandwidth) ? Math.min(roof.flops, roof.bandwidth * x) : roof.flops;
  }

  // Each roof's label at the right end of its flat part, moved up where two would overlap.
  function drawRoofLabels(u, roofs, points) {
    var ratio = window.devicePixelRatio || 1;
    var ctx = clipToPlot(u);
    var placedAt = [];
    roofs
      .map(function (r) { return { text: r.label, y: u.valToPos(r.flops / 1e9, "y", true) - 5 * ratio }; })
      .sort(function (a, b) { return b.y - a.y; })
      .forEach(function (l) {
        var y = l.y;
        placedAt.forEach(function (other) {
          if (Math.abs(other - y) < 14 * ratio) {
            y = other - 14 * ratio;
          }
        });
        placedAt.push(y);
        ctx.font = 11 * ratio + "px system-ui, sans-serif";
        var w = ctx.measureText(l.text).width;
        canvasLabel(ctx, l.text, u.bbox.left + u.bbox.width - w - 8 * ratio, y, "#333333", ratio);
      });
    // Each point's metric beside it: to the right, else left, above or below, whichever is free of
    // the points and labels already there; else to the right, moved down past them.
    // (Boxes: left x, width w, baseline y, height h above it.)
    var h = 13 * ratio;
    var taken = points.map(function (p) {
      var r = 7 * ratio;
      return { x: u.valToPos(p.intensity, "x", true) - r, y: u.valToPos(p.rate / 1e9, "y", true) + r, w: 2 * r };
    });
    function clash(x, y, w) {
      for (var k = 0; k < taken.length; k++) {
        var t = taken[k];
        if (x < t.x + t.w && t.x < x + w && y - h < t.y && t.y - h < y) {
          return t;
        }
      }
      return null;
    }
    ctx.font = 11 * ratio + "px system-ui, sans-serif";
    points.forEach(function (p) {
      var px = u.valToPos(p.intensity, "x", true);
      var py = u.valToPos(p.rate / 1e9, "y", true);
      var w = ctx.measureText(p.metric).width;
      var gap = 9 * ratio;
      var spots = [
        [px + gap, py + 4 * ratio],
        [px - gap - w, py + 4 * ratio],
        [px - w / 2, py - gap],
        [px - w / 2, py + gap + 10 * ratio],
      ];
      var spot = null;
      for (var k = 0; k < spots.length && spot === null; k++) {
        if (clash(spots[k][0], spots[k][1], w) === null) {
          spot = spots[k];
        }
      }
      if (spot === null) {
        // Each step moves y strictly down (a whole pixel past rounding); bounded by the boxes.
        spot = spots[0];
        for (var pass = 0, t = clash(spot[0], spot[1], w); t !== null && pass <= taken.length; pass++) {
          spot = [spot[0], t.y + h + 1];
          t = clash(spot[0], spot[1], w);
        }
      }
      taken.push({ x: spot[0], y: spot[1], w: w });
      ctx.fillStyle = p.flags.length ? FLAG : "#333333";
      ctx.fillText(p.metric, spot[0], spot[1]);
    });
    ctx.restore();
  }

  function rooflineChart(roofline, flagColour) {
    var element = document.getElementById(roofline.id);
    if (!element) {
      return null;
    }
    var points = roofline.points.filter(function (p) { return notNull(p.intensity) && notNull(p.rate) && p.intensity > 0 && p.rate > 0; });
    var roofs = roofline.roofs.filter(function (r) { return notNull(r.flops) && r.flops > 0; });
    if (!points.length) {
      return null; // nothing measurable to place (the alt text names what there is)
    }
    var intensities = points.map(function (p) { return p.intensity; });
    var ridges = roofs.filter(function (r) { return notNull(r.bandwidth) && r.bandwidth > 0; })
      .map(function (r) { return r.flops / r.bandwidth; });
    var spanned = intensities.concat(ridges);
    var xRange = decades(Math.min.apply(null, spanned) / 2, Math.max.apply(null, spanned) * 2);
    var low = xRange[0];
    var high = xRange[1];
    var xs = mergedXs([[low, high], intensities, ridges]);
    var series = [{ label: "intensity", value: withUnit(" FLOP/byte", 3) }];
    var columns = [xs];
    var ys = [];
    roofs.forEach(function (r) {
      var measured = !r.dashed;
      series.push({
        label: r.label,
        stroke: measured ? "#333333" : "#888888",
        width: measured ? 2 : 1.5,
        dash: measured ? undefined : [8, 5],
        points: { show: false },
        value: withUnit(" GFLOP/s", 4),
      });
      var values = xs.map(function (x) { return roofAt(r, x) / 1e9; });
      ys = ys.concat(values);
      columns.push(values);
    });
    points.forEach(function (p) {
      var flagged = p.flags.length > 0;
      var text = flagged ? " FLAGGED: " + p.flags.join("; ") : "";
      series.push({
        label: p.label,
        stroke: p.colour,
        width: 0,
        paths: function () { return null; },
        points: flagged
          ? { show: true, size: 14, width: 3, fill: p.colour, stroke: flagColour }
          : { show: true, size: 10, width: 1, fill: p.colour, stroke: "#222222" },
        marker: p.colour,
        flagged: flagged,
        value: function (u, v) { return notNull(v) ? fmt(v, 4) + " GFLOP/s at " + fmt(p.intensity, 3) + " FLOP/byte" + text : ""; },
      });
      ys.push(p.rate / 1e9);
      columns.push(placed(xs, [p.intensity], [p.rate / 1e9]));
    });
    var positive = ys.filter(function (v) { return v > 0; });
    var yRange = decades(Math.min.apply(null, positive) / 1.5, Math.max.apply(null, positive) * 1.5);
    var opts = options(roofline, element, series, {
      height: 420,
      scales: {
        x: { time: false, distr: 3, range: function () { return xRange; } },
        y: { distr: 3, range: function () { return yRange; } },
      },
      axes: [{ label: roofline.x }, { label: roofline.y, size: 70 }],
      hooks: { draw: [function (u) { drawRoofLabels(u, roofs, points); }] },
    });
    return new uPlot(opts, columns, element);
  }

  // Between the last sample of one round and the first of the next (x: 1-based sample number).
  function edgesOf(series) {
    var edges = [];
    var edge = 0;
    series.round_sizes.slice(0, -1).forEach(function (size) {
      edge += size;
      edges.push(edge + 0.5);
    });
    return edges;
  }

  // One grey set of boundaries when every framework's rounds have the same sizes, else one set
  // per framework in its colour.
  function boundaries(timeline) {
    var sets = timeline.series.map(function (s) {
      return { name: s.framework, colour: s.colour, edges: edgesOf(s) };
    }).filter(function (b) { return b.edges.length > 0; });
    var same = sets.every(function (b) { return b.edges.join() === sets[0].edges.join(); });
    if (same && sets.length) {
      return [{ name: "", colour: "#888888", edges: sets[0].edges }];
    }
    return sets;
  }

  function drawBoundaries(u, sets) {
    var ratio = window.devicePixelRatio || 1;
    var ctx = clipToPlot(u);
    ctx.lineWidth = ratio;
    ctx.setLineDash([5 * ratio, 4 * ratio]);
    sets.forEach(function (set, k) {
      ctx.strokeStyle = set.colour;
      set.edges.forEach(function (edge, r) {
        var x = u.valToPos(edge, "x", true);
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
        var text = (set.name ? set.name + " " : "") + "round " + (r + 2);
        canvasLabel(ctx, text, x + 4 * ratio, u.bbox.top + (13 + 14 * k) * ratio, set.colour === "#888888" ? "#555555" : set.colour, ratio);
      });
    });
    ctx.restore();
  }

  function timelineChart(timeline, flagColour, markColour) {
    var element = document.getElementById(timeline.id);
    if (!element) {
      return null;
    }
    var n = Math.max.apply(null, timeline.series.map(function (s) { return s.samples.length; }));
    var xs = [];
    for (var i = 1; i <= n; i++) {
      xs.push(i);
    }
    var scale = timeline.scale;
    var unit = " " + timeline.value_unit;
    var series = [{ label: "sample", value: function (u, v) { return notNull(v) ? "#" + v : ""; } }];
    var columns = [xs];
    timeline.series.forEach(function (s) {
      var apart = new Set(s.marks.map(function (m) { return m[0]; }));
      var ys = empty(n);
      s.samples.forEach(function (v, k) {
        if (notNull(v) && !apart.has(k)) {
          ys[k] = v / scale;
        }
      });
      var line = lineSeries(s.label, s.colour, {
        width: 1,
        size: 5,
        dash: s.flagged ? [5, 4] : undefined,
        flagged: s.flagged,
        value: withUnit(unit, 3),
      });
      series.push(line);
      columns.push(ys);
      s.marked.forEach(function (m) {
        var marked = empty(n);
        m.indices.forEach(function (k) {
          if (k < s.samples.length && notNull(s.samples[k])) {
            marked[k] = s.samples[k] / scale;
          }
        });
        series.push({
          label: m.label,
          stroke: markColour,
          width: 0,
          paths: function () { return null; },
          points: { show: true, size: 11, width: 2.5, fill: s.colour, stroke: markColour },
          value: withUnit(unit, 3),
          marker: s.colour,
        });
        columns.push(marked);
      });
    });
    var sets = boundaries(timeline);
    if (sets.length) {
      var count = sets.length === 1 ? sets[0].edges.length : 0;
      series.push({
        label: count === 1 ? "1 round boundary (a new process)"
          : count > 1 ? count + " round boundaries (a new process each)" : "round boundaries (a new process each)",
        stroke: "#888888",
        width: 1,
        dash: [5, 4],
        points: { show: false },
        value: function () { return sets.length === 1 ? "dashed grey line" : "dashed, in the framework's colour"; },
      });
      columns.push(empty(n));
    }
    var y = {};
    if (timeline.log) {
      var positive = [];
      columns.slice(1).forEach(function (c) { c.forEach(function (v) { if (notNull(v) && v > 0) { positive.push(v); } }); });
      if (positive.length) {
        var yRange = decades(Math.min.apply(null, positive), Math.max.apply(null, positive));
        y = { distr: 3, range: function () { return yRange; } };
      }
    }
    var opts = options(timeline, element, series, {
      scales: { x: { time: false, range: [0.5, n + 0.5] }, y: y },
      axes: [{ label: timeline.x, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] }, { label: timeline.y, size: 70 }],
      hooks: { draw: [function (u) { drawBoundaries(u, sets); }] },
    });
    return new uPlot(opts, columns, element);
  }

  // Throughput against batch size (harness/publish/inference_charts.py): one line per framework over
  // its unflagged points, its flagged points ringed in red in a series of their own (joined to the
  // rest by a dashed line), whiskers spanning each point's interquartile range, and a dashed vertical
  // line at each framework's saturation batch.
  function drawSweeps(u, sweeps) {
    var ratio = window.devicePixelRatio || 1;
    var ctx = clipToPlot(u);
    sweeps.forEach(function (s) {
      ctx.strokeStyle = s.colour;
      s.batches.forEach(function (b, k) {
        if (!notNull(s.low[k]) || !notNull(s.high[k])) {
          return;
        }
        var flagged = s.flags[k] !== null;
        var x = u.valToPos(b, "x", true);
        var y0 = u.valToPos(s.low[k], "y", true);
        var y1 = u.valToPos(s.high[k], "y", true);
        var cap = 4 * ratio;
        ctx.lineWidth = 1.5 * ratio;
        ctx.setLineDash(flagged ? [4 * ratio, 3 * ratio] : []);
        ctx.beginPath();
        ctx.moveTo(x, y0);
        ctx.lineTo(x, y1);
        ctx.moveTo(x - cap, y0);
        ctx.lineTo(x + cap, y0);
        ctx.moveTo(x - cap, y1);
        ctx.lineTo(x + cap, y1);
        ctx.stroke();
      });
      if (s.flags.some(function (f) { return f !== null; })) {
        ctx.lineWidth = 1.5 * ratio;
        ctx.setLineDash([6 * ratio, 4 * ratio]);
        ctx.beginPath();
        var drawing = false;
        s.batches.forEach(function (b, k) {
          if (!notNull(s.rates[k])) {
            drawing = false;
            return;
          }
          var x = u.valToPos(b, "x", true);
          var y = u.valToPos(s.rates[k], "y", true);
          if (drawing) {
            ctx.lineTo(x, y);
          } else {
            ctx.moveTo(x, y);
            drawing = true;
          }
        });
        ctx.stroke();
      }
    });
    var row = 0;
    sweeps.forEach(function (s) {
      if (!notNull(s.saturation)) {
        return;
      }
      var x = u.valToPos(s.saturation, "x", true);
      ctx.strokeStyle = s.colour;
      ctx.lineWidth = 1.5 * ratio;
      ctx.setLineDash([6 * ratio, 4 * ratio]);
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      ctx.font = 11 * ratio + "px system-ui, sans-serif";
      var w = ctx.measureText(s.saturation_label).width;
      // Left of the line where it would run off the plot's right edge.
      var left = x + 4 * ratio + w > u.bbox.left + u.bbox.width ? x - 6 * ratio - w : x + 4 * ratio;
      canvasLabel(ctx, s.saturation_label, left, u.bbox.top + (13 + 14 * row) * ratio, s.colour, ratio);
      row += 1;
    });
    ctx.restore();
  }

  function throughputChart(spec, flagColour) {
    var element = document.getElementById(spec.id);
    if (!element) {
      return null;
    }
    var xs = mergedXs(spec.series.map(function (s) { return s.batches; })).filter(function (b) { return b > 0; });
    if (!xs.length) {
      return null;
    }
    var series = [{ label: "batch size", value: function (u, v) { return notNull(v) ? "batch " + v : ""; } }];
    var columns = [xs];
    var ys = [];
    spec.series.forEach(function (s) {
      var unit = " " + s.unit;
      var normal = s.rates.map(function (v, k) { return s.flags[k] === null ? v : null; });
      var flagged = s.rates.map(function (v, k) { return s.flags[k] !== null ? v : null; });
      if (normal.some(notNull)) {
        var line = lineSeries(s.label, s.colour, { width: 2, size: 7, value: withUnit(unit, 4) });
        line.spanGaps = false; // solid only between neighbouring unflagged points; the dashed line spans the rest
        series.push(line);
        columns.push(placed(xs, s.batches, normal));
      }
      if (flagged.some(notNull)) {
        var texts = placed(xs, s.batches, s.flags);
        series.push({
          label: s.flagged_label,
          stroke: s.colour,
          width: 0,
          dash: [6, 4],
          paths: function () { return null; },
          points: { show: true, size: 13, width: 3, fill: s.colour, stroke: flagColour },
          marker: s.colour,
          flagged: true,
          value: function (u, v, si, idx) {
            return notNull(v) ? fmt(v, 4) + unit + " FLAGGED: " + texts[idx] : "";
          },
        });
        columns.push(placed(xs, s.batches, flagged));
      }
      [s.rates, s.low, s.high].forEach(function (vs) {
        vs.forEach(function (v) {
          if (notNull(v)) {
            ys.push(v);
          }
        });
      });
    });
    spec.series.forEach(function (s) {
      if (notNull(s.saturation)) {
        series.push({
          label: s.saturation_label,
          stroke: s.colour,
          width: 1.5,
          dash: [6, 4],
          paths: function () { return null; }, // drawn across the whole plot by drawSweeps
          points: { show: false },
          value: function () { return "dashed vertical line"; },
        });
        columns.push(empty(xs.length));
      }
    });
    var y = { range: [0, (Math.max.apply(null, ys.concat([0])) || 1) * 1.08] };
    var positive = ys.filter(function (v) { return v > 0; });
    if (spec.log_y && positive.length) {
      var yRange = decades(Math.min.apply(null, positive), Math.max.apply(null, positive));
      y = { distr: 3, range: function () { return yRange; } };
    }
    // The ticks are the measured batch sizes themselves, so uPlot's log ticks never step from an end
    // that is not a power of two; half a step of room either side keeps the end points whole.
    var xRange = [xs[0] / 1.5, xs[xs.length - 1] * 1.5];
    var opts = options(spec, element, series, {
      scales: { x: { time: false, distr: 3, log: 2, range: function () { return xRange; } }, y: y },
      axes: [
        {
          label: spec.x,
          splits: function () { return xs; },
          values: function (u, splits) { return splits.map(function (v) { return String(v); }); },
        },
        { label: spec.y, size: 70 },
      ],
      hooks: { draw: [function (u) { drawSweeps(u, spec.series); }] },
    });
    return new uPlot(opts, columns, element);
  }

  function drawPictures(pictures) {
    if (pictures.learning) {
      pictures.learning.charts.forEach(function (spec) { learningChart(spec, pictures.learning); });
    }
    if (pictures.roofline) {
      rooflineChart(pictures.roofline, pictures.flag_colour);
    }
    if (pictures.inference) {
      throughputChart(pictures.inference, pictures.flag_colour);
    }
    pictures.timelines.forEach(function (t) { timelineChart(t, pictures.flag_colour, pictures.mark_colour); });
  }

  if (data.pictures) {
    drawPictures(data.pictures);
    return;
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
