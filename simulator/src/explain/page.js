"use strict";
// Draws the run's lanes from the JSON in #data: true time left to right, one lane per
// client (with its clock's readings in a row beneath), per server and for the resource.
// Zoom (wheel, buttons, + - 0 keys) and pan (drag) redraw the visible time range; hovering
// a shape shows its details. No request of any kind is made.
//
// Each drawing is first a list of shapes (a tree of records: name, attributes, hover
// details); a run with few shapes gets one SVG element per shape, a large one is painted on
// a canvas, styled from the same classes of page.css, with its own hit test for hover.
(function () {
  const started = performance.now();
  const D = JSON.parse(document.getElementById("data").textContent);
  const svg = document.getElementById("lanes");
  const tip = document.getElementById("tip");
  // The SVG namespace is a name, not an address: nothing is fetched from it.
  const NS = "http:" + "//www.w3.org/2000/svg";
  const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948",
    "#9c755f", "#e15759"];
  const color = (epoch) => PALETTE[(epoch + PALETTE.length - 1) % PALETTE.length];
  const LEFT = 150, RIGHT = 24, TOP = 48, LANE = 34, CLOCK = 16, GAP = 6;
  // The overlaps' flags have a row of their own (its baseline here), above the row of the
  // time axis's labels (theirs at TOP - 10).
  const FLAG_Y = 15;
  // Messages between a lane and the lanes below it, sent within one column this many pixels
  // wide, are drawn as one bundle (hover lists them); a column with one message draws it as
  // an arrow with its own details.
  const BUNDLE_PX = 12;
  // Above this many shapes for the whole run, the lanes are painted on a canvas.
  const CANVAS_ABOVE = 3000;
  // A bundle's hover lists this many of its messages, and counts the rest.
  const BUNDLE_LISTED = 12;
  const end = Math.max(D.end, 1);
  let view = { from: 0, to: end };
  // Messages come as differences in microseconds (see html.rs): back to instants in ns.
  let sentAt = 0;
  const messages = D.messages.map(([from, to, since, flight, label]) => {
    sentAt += since;
    return [from, to, sentAt * 1000, flight === null ? null : (sentAt + flight) * 1000, label];
  });

  // Rows: each lane, and a clock row under each client.
  const rows = [];
  let y = TOP;
  D.lanes.forEach((lane, i) => {
    rows[i] = { y: y, h: LANE };
    y += LANE;
    if (lane.kind === "client") {
      rows[i].clockY = y;
      y += CLOCK;
    }
    y += GAP;
  });
  const height = y + 10;
  svg.setAttribute("height", height);

  // Instants (and the times in hover details) in milliseconds; durations with three
  // significant digits, as the simulator's sentences write them (fmt_duration in Rust).
  const ms = (ns) => (ns / 1e6).toFixed(3) + " ms";
  function duration(ns) {
    const units = [[1, "ns"], [1e3, "\u00b5s"], [1e6, "ms"], [1e9, "s"]];
    let u = 0;
    while (u + 1 < units.length && ns >= units[u + 1][0]) u++;
    for (;;) {
      const v = ns / units[u][0];
      const t = v.toFixed(u === 0 || v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2);
      if (t === "1000" && u + 1 < units.length) { u++; continue; }
      return t + " " + units[u][1];
    }
  }
  // Milliseconds with a thousands separator and up to three decimals, as the axis and the
  // clock readings write them (by hand: the browser's locale formatting costs tens of ms to
  // start).
  function grouped(ns) {
    const [whole, part] = (Math.round(ns / 1e3) / 1e3).toFixed(3).split(".");
    const digits = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    const decimals = part.replace(/0+$/, "");
    return decimals ? digits + "." + decimals : digits;
  }
  // A generous estimate of a label's width (an average glyph is about 0.55 em).
  const textWidth = (s, px) => s.length * px * 0.7;
  // The width is read once per drawing: reading it after each new shape would make the
  // browser lay the page out again every time.
  let canvas = 1200;
  const width = () => canvas;
  const x = (t) => LEFT + (t - view.from) / (view.to - view.from) * (canvas - LEFT - RIGHT);
  const timeAt = (px) => view.from + (px - LEFT) / (canvas - LEFT - RIGHT) * (view.to - view.from);
  const visible = (a, b) => b >= view.from && a <= view.to;
  const mid = (i) => rows[i].y + rows[i].h / 2;

  // Shapes: records in a tree of groups; hover details are words or a function that makes
  // them when hovered (a run has thousands of shapes).
  function el(name, attrs, parent, tip) {
    const e = { name: name, attrs: attrs, tip: tip, kids: name === "g" ? [] : null, text: null };
    parent.kids.push(e);
    return e;
  }
  function text(content, attrs, parent, tip) {
    const e = el("text", attrs, parent, tip);
    e.text = content;
    return e;
  }
  function band(from, until, min) {
    const a = Math.max(x(from), LEFT), b = Math.min(x(until), width() - RIGHT);
    const w = Math.max(b - a, min || 1);
    return { x: b - a < (min || 1) ? (a + b) / 2 - w / 2 : a, w: w };
  }

  // The boxes of the clock readings in view: lines are cut where they would cross one.
  let clear = [];
  // The parts of the segment from (x0, y0) to (x1, y1) outside every box, as ranges of its
  // parameter (0 at the start, 1 at the end): Liang-Barsky clipping against each box.
  function outside(x0, y0, x1, y1) {
    let parts = [[0, 1]];
    const dx = x1 - x0, dy = y1 - y0;
    const left = Math.min(x0, x1), right = Math.max(x0, x1);
    const top = Math.min(y0, y1), bottom = Math.max(y0, y1);
    for (const b of clear) {
      if (b[0] > right || b[2] < left || b[1] > bottom || b[3] < top) continue;
      let t0 = 0, t1 = 1;
      for (const [p, q] of [[-dx, x0 - b[0]], [dx, b[2] - x0], [-dy, y0 - b[1]], [dy, b[3] - y0]]) {
        if (p === 0) { if (q < 0) { t0 = 1; t1 = 0; } continue; }
        const r = q / p;
        if (p < 0) t0 = Math.max(t0, r); else t1 = Math.min(t1, r);
      }
      if (t0 >= t1) continue;
      parts = parts.flatMap(([p, q]) => [[p, Math.min(q, t0)], [Math.max(p, t1), q]])
        .filter(([p, q]) => q > p);
    }
    return parts;
  }
  // A line in pieces, none of them across a clock reading.
  function line(x0, y0, x1, y1, cls, parent, tipText) {
    for (const [p, q] of outside(x0, y0, x1, y1)) {
      el("line", { x1: x0 + (x1 - x0) * p, y1: y0 + (y1 - y0) * p, x2: x0 + (x1 - x0) * q,
        y2: y0 + (y1 - y0) * q, class: cls }, parent, tipText);
    }
  }

  // The tick spacing: 1, 2 or 5 times a power of ten, about 8 ticks across.
  function ticks() {
    const span = view.to - view.from;
    const raw = span / 8;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    const out = [];
    for (let t = Math.ceil(view.from / step) * step; t <= view.to; t += step) out.push(t);
    return out;
  }

  // A client's clock reading at true time t, between its recorded readings (exact at
  // them; a step is recorded on both sides, so the line between does not smear it).
  function reading(samples, t) {
    if (!samples || samples.length === 0) return null;
    let lo = 0, hi = samples.length - 1;
    if (t <= samples[0][0]) return samples[0][1];
    if (t >= samples[hi][0]) return samples[hi][1];
    while (hi - lo > 1) {
      const m = (lo + hi) >> 1;
      if (samples[m][0] <= t) lo = m; else hi = m;
    }
    const [t0, r0] = samples[lo], [t1, r1] = samples[hi];
    return r0 + (r1 - r0) * (t - t0) / (t1 - t0);
  }

  function arrow(from, to, sent, arrived, cls, parent, tipText) {
    const x0 = x(sent), y0 = mid(from);
    const lost = arrived === null || arrived === undefined;
    const x1 = lost ? x0 + 14 : x(arrived), y1 = lost ? (y0 + mid(to)) / 2 : mid(to);
    line(x0, y0, x1, y1, cls + (lost ? " lost" : ""), parent, tipText);
    if (lost) {
      text("\u00d7", { x: x1 - 3, y: y1 + 4, class: "overlap-label" }, parent);
      return;
    }
    const angle = Math.atan2(y1 - y0, x1 - x0), s = 5;
    const p = [[x1, y1],
      [x1 - s * Math.cos(angle - 0.45), y1 - s * Math.sin(angle - 0.45)],
      [x1 - s * Math.cos(angle + 0.45), y1 - s * Math.sin(angle + 0.45)]];
    el("polygon", { points: p.map((q) => q.join(",")).join(" "), class: cls + " head" }, parent);
  }

  function axis(root) {
    const grid = el("g", { class: "grid" }, root);
    for (const t of ticks()) {
      el("line", { x1: x(t), y1: TOP - 6, x2: x(t), y2: height - 10, class: "tick" }, grid);
      text(grouped(t) + " ms",
        { x: x(t), y: TOP - 10, class: "tick-label" }, grid);
    }
  }

  // Lanes, each a group named after its process, with the clock row of a client; the
  // boxes of the clock's readings are kept clear of lines.
  function lanes(root) {
    clear = [];
    D.lanes.forEach((lane, i) => {
      const g = el("g", { class: "lane lane-" + lane.kind, "data-lane": lane.name }, root);
      el("rect", { x: LEFT, y: rows[i].y, width: width() - LEFT - RIGHT, height: LANE,
        class: "lane-bg" + (i % 2 ? " alt" : "") }, g);
      text(lane.name, { x: 8, y: mid(i) + 4, class: "lane-label" }, g);
      if (lane.kind !== "client") return;
      const samples = D.clocks[i];
      const c = el("g", { class: "clock", "data-client": lane.name }, g);
      const cy = rows[i].clockY;
      text(lane.name + "'s clock", { x: 8, y: cy + 11, class: "clock-label" }, c);
      for (const t of ticks()) {
        const r = reading(samples, t);
        if (r === null) continue;
        const off = Math.abs(r - t) >= 1e6;
        const words = grouped(r);
        text(words, { x: x(t), y: cy + 11, "text-anchor": "middle",
          class: "clock-reading" + (off ? " off" : "") }, c,
          lane.name + "'s clock reads " + ms(r) + " at " + ms(t) + " true time" +
          (off ? " (" + (r > t ? "+" : "-") + duration(Math.abs(r - t)) + " off)" : ""));
        const half = textWidth(words, 10) / 2 + 2;
        clear.push([x(t) - half, cy, x(t) + half, cy + CLOCK]);
      }
    });
  }

  // Faults: bands for pauses and the world's events, a line on the lane otherwise.
  function faults(root) {
    const g = el("g", { class: "faults" }, root);
    for (const f of D.faults) {
      if (!visible(f.from, f.until)) continue;
      if (f.lane === null) {
        const b = band(f.from, f.until, 3);
        el("rect", { x: b.x, y: TOP, width: b.w, height: height - TOP - 10, class: "fault-band" },
          g, f.what + " at " + ms(f.from));
      } else if (f.until > f.from) {
        const b = band(f.from, f.until, 2);
        el("rect", { x: b.x, y: rows[f.lane].y + 2, width: b.w, height: LANE - 4, class: "pause" },
          g, D.lanes[f.lane].name + " " + f.what + " from " + ms(f.from) + " to " + ms(f.until) +
          " (" + duration(f.until - f.from) + ")");
      } else {
        el("line", { x1: x(f.from), y1: rows[f.lane].y, x2: x(f.from), y2: rows[f.lane].y + LANE,
          class: "fault" }, g, f.what + " at " + ms(f.from));
      }
    }
  }

  // Lock keys on the servers.
  function keys(root) {
    const g = el("g", { class: "keys" }, root);
    const ENDED = ["expired", "removed", "held at the end"];
    for (const [lane, epoch, fromUs, untilUs, ended] of D.keys) {
      const from = fromUs * 1000, until = untilUs * 1000;
      if (!visible(from, until)) continue;
      const b = band(from, until, 2);
      el("rect", { x: b.x, y: rows[lane].y + 8, width: b.w, height: LANE - 16, class: "key",
        fill: epoch ? color(epoch) : "#9e9e9e" }, g,
        () => D.lanes[lane].name + " holds the key of " +
          (epoch ? "epoch " + epoch : "a holder without a lease") + " from " + ms(from) +
          " to " + ms(until) + ": " + ENDED[ended]);
    }
  }

  // Validity (dashed, top half) and believed windows (filled, bottom half) per lease.
  function leases(root) {
    const g = el("g", { class: "leases" }, root);
    D.leases.forEach((l, i) => {
      const top = rows[l.lane].y;
      const validUntil = l.valid_until === null ? end : l.valid_until;
      const details = D.lanes[l.lane].name + ", epoch " + l.epoch + " (fence " + l.fence +
        ", token " + l.token + "): granted at " + ms(l.granted);
      if (visible(l.granted, validUntil)) {
        const b = band(l.granted, validUntil, 2);
        el("rect", { x: b.x, y: top + 3, width: b.w, height: LANE / 2 - 4, class: "validity",
          stroke: color(l.epoch), "data-lease": i }, g,
          () => details + "\nvalidity it computed: until " + ms(l.valid_until_local) + " on its clock, read at " +
          (l.valid_until === null ? "no time before the end" : ms(l.valid_until) + " true time"));
      }
      for (const [from, until] of l.windows) {
        if (!visible(from, until)) continue;
        const b = band(from, until, 2);
        el("rect", { x: b.x, y: top + LANE / 2, width: b.w, height: LANE / 2 - 3, class: "window",
          fill: color(l.epoch), "data-lease": i }, g,
          () => details + "\nbelieved it held the lease from " + ms(from) + " to " + ms(until) +
          (l.released !== null ? "\nreleased at " + ms(l.released) : "") +
          (l.crashed !== null ? "\ncrashed at " + ms(l.crashed) : "") +
          (l.extensions ? "\nextended " + l.extensions + " time(s)" : ""));
      }
    });
  }

  // Overlaps: a band across every lane, and a flag (a marker and its number) in the row
  // above the time axis's labels; a number that would run into the previous one is left to
  // the marker's hover.
  function overlaps(root) {
    const g = el("g", { class: "overlaps" }, root);
    let free = 0;
    D.overlaps.forEach((o, n) => {
      const a = D.leases[o.first], b = D.leases[o.second];
      const words = D.lanes[a.lane].name + " (epoch " + a.epoch + ") and " + D.lanes[b.lane].name +
        " (epoch " + b.epoch + ") both believed they held the lease from " + ms(o.from) + " to " +
        ms(o.until) + " (" + duration(o.until - o.from) + "), cause " + o.cause +
        (o.used ? "; both used the resource inside it" : "");
      if (!visible(o.from, o.until)) return;
      const r = band(o.from, o.until, 6);
      const cx = r.x + r.w / 2;
      el("rect", { x: r.x, y: TOP - 4, width: r.w, height: height - TOP - 6, class: "overlap",
        id: "overlap-" + (n + 1) }, g, words);
      el("polygon", { points: cx + "," + (FLAG_Y + 1) + " " + (cx - 6) + "," + (FLAG_Y - 9) +
        " " + (cx + 6) + "," + (FLAG_Y - 9), class: "overlap-marker" }, g, words);
      const label = "overlap " + (n + 1), w = textWidth(label, 11);
      const right = cx + 8 + w <= width() - 4;
      const from = right ? cx + 8 : cx - 8 - w;
      if (from < free) return;
      text(label, { x: right ? cx + 8 : cx - 8, y: FLAG_Y, "text-anchor": right ? "start" : "end",
        class: "overlap-label" }, g, words);
      free = from + w + 6;
    });
  }

  // A bundle's hover: how many messages, between which lanes, when, what they said (each
  // label counted), then the first few one by one.
  function bundleWords(list, upper) {
    const others = new Set(), said = new Map();
    let first = Infinity, last = 0;
    for (const [from, to, sent, arrived, label] of list) {
      others.add(from === upper ? to : from);
      said.set(D.labels[label], (said.get(D.labels[label]) || 0) + 1);
      first = Math.min(first, sent);
      last = Math.max(last, arrived === null ? sent : arrived);
    }
    const names = [...others].sort((p, q) => p - q).map((l) => D.lanes[l].name);
    const lines = [list.length + " messages between " + D.lanes[upper].name + " and " +
      names.join(", ") + ", from " + ms(first) + " to " + ms(last) + ":",
      [...said].map(([label, n]) => label + " \u00d7" + n).join(", ")];
    for (const [from, to, sent, arrived, label] of list.slice(0, BUNDLE_LISTED)) {
      lines.push(D.lanes[from].name + " \u2192 " + D.lanes[to].name + ": " + D.labels[label] +
        ", sent " + ms(sent) + (arrived === null ? ", lost" : ""));
    }
    if (list.length > BUNDLE_LISTED) {
      lines.push("\u2026 and " + (list.length - BUNDLE_LISTED) + " more: zoom in to see each one");
    }
    return lines.join("\n");
  }

  // Messages in view, by column and upper lane: alone, an arrow; several, one bundle from
  // the upper lane to the farthest lane they reach, from the first send to the last arrival.
  function messageShapes(root) {
    const g = el("g", { class: "messages" }, root);
    const columns = new Map();
    for (const m of messages) {
      const [from, to, sent, arrived] = m;
      if (!visible(sent, arrived === null ? sent : arrived)) continue;
      const key = Math.min(from, to) * 1e6 + Math.floor((x(sent) - LEFT) / BUNDLE_PX);
      const list = columns.get(key);
      if (list) list.push(m); else columns.set(key, [m]);
    }
    for (const [key, list] of columns) {
      if (list.length === 1) {
        const [from, to, sent, arrived, label] = list[0];
        arrow(from, to, sent, arrived, "msg", g, () => D.lanes[from].name + " \u2192 " +
          D.lanes[to].name + ": " + D.labels[label] + "\nsent " + ms(sent) +
          (arrived === null ? ", lost" : ", arrives " + ms(arrived)));
        continue;
      }
      const upper = Math.floor(key / 1e6);
      let far = upper, first = Infinity, last = 0;
      for (const [from, to, sent, arrived] of list) {
        far = Math.max(far, from, to);
        first = Math.min(first, sent);
        last = Math.max(last, arrived === null ? sent : arrived);
      }
      line(x(first), mid(upper), x(last), mid(far), "msg bundle", g, () => bundleWords(list, upper));
    }
  }

  function accessShapes(root) {
    const resource = D.lanes.length - 1;
    const g = el("g", { class: "accesses" }, root);
    for (const a of D.accesses) {
      if (!visible(a.sent, a.arrived === null ? a.sent : a.arrived)) continue;
      arrow(a.from, resource, a.sent, a.arrived, "access " + a.fates[0], g,
        () => D.lanes[a.from].name + "'s " + a.kind + " #" + a.index + " (epoch " + a.epoch + ", fence " +
        a.fence + ")\nsent " + ms(a.sent) + (a.arrived === null ? ", never arrived" : ", arrives " +
        ms(a.arrived)) + "\nplain: " + a.fates[0] + ", fenced: " + a.fates[1] + ", strict: " + a.fates[2]);
    }
  }

  // The view's shapes, in the order drawn (later ones on top).
  function shapes() {
    const root = { kids: [] };
    axis(root);
    lanes(root);
    faults(root);
    keys(root);
    leases(root);
    overlaps(root);
    if (document.getElementById("show-messages").checked) messageShapes(root);
    accessShapes(root);
    return root;
  }
  function count(node) {
    let n = 0;
    for (const r of node.kids) n += r.kids ? count(r) : 1;
    return n;
  }

  // SVG: an element per shape, its hover details found by a number on it.
  let tips = [];
  function toSvg(node, parent) {
    for (const r of node.kids) {
      const e = document.createElementNS(NS, r.name);
      for (const k in r.attrs) e.setAttribute(k, r.attrs[k]);
      if (r.tip) {
        e.setAttribute("data-t", tips.length);
        tips.push(r.tip);
      }
      if (r.text !== null) e.textContent = r.text;
      if (r.kids) toSvg(r, e);
      parent.appendChild(e);
    }
  }
  function tipOf(target) {
    const id = target.getAttribute && target.getAttribute("data-t");
    if (id === null || id === undefined) return null;
    const tip = tips[Number(id)];
    return typeof tip === "function" ? tip() : tip;
  }

  // Canvas: each shape painted with the style page.css gives its class (read once per class
  // and colour from a probe element), and kept with its details for the hit test.
  const styles = new Map();
  function styleOf(name, a) {
    const key = name + "|" + a.class + "|" + a.fill + "|" + a.stroke;
    if (!styles.has(key)) {
      const probe = document.createElementNS(NS, name);
      for (const k of ["class", "fill", "stroke"]) if (a[k] !== undefined) probe.setAttribute(k, a[k]);
      svg.appendChild(probe);
      const cs = getComputedStyle(probe);
      styles.set(key, { fill: cs.fill, stroke: cs.stroke, width: parseFloat(cs.strokeWidth) || 1,
        dash: (cs.strokeDasharray.match(/[\d.]+/g) || []).map(Number),
        opacity: parseFloat(cs.opacity), font: cs.fontWeight + " " + cs.fontSize + " " + cs.fontFamily,
        anchor: cs.textAnchor });
      svg.removeChild(probe);
    }
    return styles.get(key);
  }
  const ALIGN = { start: "left", middle: "center", end: "right" };
  let hits = [];
  // The style last set on the context: the next shape of the same style sets nothing.
  let current = null;
  function paint(node, ctx) {
    for (const r of node.kids) {
      if (r.kids) { paint(r, ctx); continue; }
      const a = r.attrs, s = styleOf(r.name, a);
      if (s !== current) {
        ctx.globalAlpha = s.opacity;
        ctx.lineWidth = s.width;
        ctx.setLineDash(s.dash);
        if (s.fill !== "none") ctx.fillStyle = s.fill;
        if (s.stroke !== "none") ctx.strokeStyle = s.stroke;
        current = s;
      }
      let box = null;
      if (r.name === "rect") {
        if (s.fill !== "none") ctx.fillRect(a.x, a.y, a.width, a.height);
        if (s.stroke !== "none") ctx.strokeRect(a.x, a.y, a.width, a.height);
        box = [a.x - 1, a.y, a.x + a.width + 1, a.y + a.height];
      } else if (r.name === "line") {
        ctx.beginPath();
        ctx.moveTo(a.x1, a.y1);
        ctx.lineTo(a.x2, a.y2);
        if (s.stroke !== "none") ctx.stroke();
      } else if (r.name === "polygon") {
        const p = a.points.split(" ").map((q) => q.split(",").map(Number));
        ctx.beginPath();
        p.forEach(([px, py], k) => (k ? ctx.lineTo(px, py) : ctx.moveTo(px, py)));
        ctx.closePath();
        if (s.fill !== "none") ctx.fill();
        box = [Math.min(...p.map((q) => q[0])), Math.min(...p.map((q) => q[1])),
          Math.max(...p.map((q) => q[0])), Math.max(...p.map((q) => q[1]))];
      } else if (r.name === "text") {
        ctx.font = s.font;
        const anchor = a["text-anchor"] || s.anchor;
        ctx.textAlign = ALIGN[anchor] || "left";
        ctx.fillText(r.text, a.x, a.y);
        const w = ctx.measureText(r.text).width;
        const left = anchor === "middle" ? a.x - w / 2 : anchor === "end" ? a.x - w : a.x;
        box = [left, a.y - 10, left + w, a.y + 2];
      }
      if (r.tip) hits.push({ r: r, box: box });
    }
  }
  // The topmost shape with details under (px, py): inside its box, or within 3 px of a line.
  function hit(px, py) {
    for (let k = hits.length - 1; k >= 0; k--) {
      const { r, box } = hits[k];
      if (box) {
        if (px >= box[0] && px <= box[2] && py >= box[1] && py <= box[3]) return r.tip;
        continue;
      }
      const a = r.attrs, dx = a.x2 - a.x1, dy = a.y2 - a.y1;
      const t = Math.max(0, Math.min(1, ((px - a.x1) * dx + (py - a.y1) * dy) / (dx * dx + dy * dy || 1)));
      if (Math.hypot(a.x1 + t * dx - px, a.y1 + t * dy - py) <= 3) return r.tip;
    }
    return null;
  }

  let surface = svg, board = null;
  function draw() {
    const box = (board || svg).clientWidth;
    canvas = Math.max(box || 1200, 400);
    const root = shapes();
    if (board === null && surface === svg && count(root) > CANVAS_ABOVE) {
      board = document.createElement("canvas");
      board.id = "lanes-canvas";
      svg.parentNode.insertBefore(board, svg);
      svg.setAttribute("display", "none");
      surface = board;
      bind();
    }
    document.body.dataset.drawing = board ? "canvas" : "svg";
    surface.dataset.rows = JSON.stringify(rows.map((r) => [r.y, r.h]));
    if (board) {
      const ratio = window.devicePixelRatio || 1;
      board.width = Math.round(canvas * ratio);
      board.height = Math.round(height * ratio);
      board.style.height = height + "px";
      const ctx = board.getContext("2d");
      ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
      ctx.clearRect(0, 0, canvas, height);
      hits = [];
      current = null;
      paint(root, ctx);
      document.body.dataset.shapes = String(count(root));
    } else {
      while (svg.firstChild) svg.removeChild(svg.firstChild);
      tips = [];
      svg.setAttribute("viewBox", "0 0 " + canvas + " " + height);
      const fragment = document.createDocumentFragment();
      toSvg(root, fragment);
      svg.appendChild(fragment);
      document.body.dataset.shapes = String(svg.querySelectorAll("*").length);
    }
    document.getElementById("range").textContent = ms(view.from) + " \u2013 " + ms(view.to);
  }

  function zoom(factor, at) {
    const span = view.to - view.from;
    const next = Math.min(Math.max(span * factor, 1000), end);
    const centre = at === undefined ? view.from + span / 2 : at;
    const share = (centre - view.from) / span;
    let from = centre - next * share;
    from = Math.min(Math.max(from, 0), end - next);
    view = { from: from, to: from + next };
    draw();
  }
  function pan(dt) {
    const span = view.to - view.from;
    const from = Math.min(Math.max(view.from + dt, 0), end - span);
    view = { from: from, to: from + span };
    draw();
  }

  // The pointer's events on the drawing, SVG or canvas.
  function bind() {
    surface.addEventListener("wheel", (e) => {
      e.preventDefault();
      const box = surface.getBoundingClientRect();
      zoom(e.deltaY < 0 ? 0.8 : 1.25, timeAt(e.clientX - box.left));
    }, { passive: false });
    surface.addEventListener("mousedown", (e) => { drag = e.clientX; surface.classList.add("dragging"); });
    surface.addEventListener("mousemove", (e) => {
      const box = surface.getBoundingClientRect();
      let t = board ? hit(e.clientX - box.left, e.clientY - box.top) : tipOf(e.target);
      if (typeof t === "function") t = t();
      if (!t) { tip.hidden = true; return; }
      tip.textContent = t;
      tip.hidden = false;
      const outer = surface.parentNode.getBoundingClientRect();
      tip.style.left = (e.clientX - outer.left + 14) + "px";
      tip.style.top = (e.clientY - outer.top + 14) + "px";
    });
    surface.addEventListener("mouseleave", () => { tip.hidden = true; });
  }
  let drag = null;
  window.addEventListener("mouseup", () => { drag = null; surface.classList.remove("dragging"); });
  window.addEventListener("mousemove", (e) => {
    if (drag === null) return;
    const dx = e.clientX - drag;
    drag = e.clientX;
    pan(-dx / (width() - LEFT - RIGHT) * (view.to - view.from));
  });
  document.getElementById("zoom-in").addEventListener("click", () => zoom(0.5));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(2));
  document.getElementById("zoom-reset").addEventListener("click", () => { view = { from: 0, to: end }; draw(); });
  document.getElementById("show-messages").addEventListener("change", draw);
  window.addEventListener("keydown", (e) => {
    if (e.key === "+" || e.key === "=") zoom(0.5);
    else if (e.key === "-") zoom(2);
    else if (e.key === "0") { view = { from: 0, to: end }; draw(); }
    else if (e.key === "ArrowLeft") pan(-(view.to - view.from) / 5);
    else if (e.key === "ArrowRight") pan((view.to - view.from) / 5);
  });
  window.addEventListener("resize", draw);

  bind();
  draw();
  document.body.dataset.renderMs = (performance.now() - started).toFixed(1);
})();
