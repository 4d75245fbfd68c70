"use strict";
// Draws the run's lanes from the JSON in #data: true time left to right, one lane per
// client (with its clock's readings in a row beneath), per server and for the resource.
// Zoom (wheel, buttons, + - 0 keys) and pan (drag) redraw the visible time range; hovering
// a shape shows its details. No request of any kind is made.
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
  const LEFT = 150, RIGHT = 24, TOP = 34, LANE = 34, CLOCK = 16, GAP = 6;
  // Up to this many messages in view, each is an arrow with its own details.
  const MESSAGE_DETAIL = 1500;
  // Likewise for the lock keys on the servers.
  const KEY_DETAIL = 1500;
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

  const ms = (ns) => (ns / 1e6).toFixed(3) + " ms";
  // The width is read once per drawing: reading it after each new shape would make the
  // browser lay the page out again every time.
  let canvas = 1200;
  const width = () => canvas;
  const x = (t) => LEFT + (t - view.from) / (view.to - view.from) * (canvas - LEFT - RIGHT);
  const timeAt = (px) => view.from + (px - LEFT) / (canvas - LEFT - RIGHT) * (view.to - view.from);
  const visible = (a, b) => b >= view.from && a <= view.to;
  const mid = (i) => rows[i].y + rows[i].h / 2;

  // Hover details, by shape: a number on the shape, the words here. Words are made only
  // when hovered (a function) where a run has thousands of shapes, and never copied into
  // the document.
  let tips = [];
  function el(name, attrs, parent, tip) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (tip) {
      e.setAttribute("data-t", tips.length);
      tips.push(tip);
    }
    parent.appendChild(e);
    return e;
  }
  function tipOf(target) {
    const id = target.getAttribute && target.getAttribute("data-t");
    if (id === null || id === undefined) return null;
    const tip = tips[Number(id)];
    return typeof tip === "function" ? tip() : tip;
  }
  function text(content, attrs, parent, tip) {
    const e = el("text", attrs, parent, tip);
    e.textContent = content;
    return e;
  }
  function band(from, until, min) {
    const a = Math.max(x(from), LEFT), b = Math.min(x(until), width() - RIGHT);
    const w = Math.max(b - a, min || 1);
    return { x: b - a < (min || 1) ? (a + b) / 2 - w / 2 : a, w: w };
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
    el("line", { x1: x0, y1: y0, x2: x1, y2: y1, class: cls + (lost ? " lost" : "") }, parent, tipText);
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

  function draw() {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    tips = [];
    canvas = Math.max(svg.clientWidth || 1200, 400);
    const W = canvas;
    svg.setAttribute("viewBox", "0 0 " + W + " " + height);
    const grid = el("g", { class: "grid" }, svg);
    for (const t of ticks()) {
      el("line", { x1: x(t), y1: TOP - 6, x2: x(t), y2: height - 10, class: "tick" }, grid);
      text((t / 1e6).toLocaleString("en", { maximumFractionDigits: 3 }) + " ms",
        { x: x(t), y: TOP - 10, class: "tick-label" }, grid);
    }
    // Lanes, each a group named after its process, with the clock row of a client.
    D.lanes.forEach((lane, i) => {
      const g = el("g", { class: "lane lane-" + lane.kind, "data-lane": lane.name }, svg);
      el("rect", { x: LEFT, y: rows[i].y, width: W - LEFT - RIGHT, height: LANE,
        class: "lane-bg" + (i % 2 ? " alt" : "") }, g);
      text(lane.name, { x: 8, y: mid(i) + 4, class: "lane-label" }, g);
      if (lane.kind === "client") {
        const samples = D.clocks[i];
        const c = el("g", { class: "clock", "data-client": lane.name }, g);
        text(lane.name + "'s clock", { x: 8, y: rows[i].clockY + 11, class: "clock-label" }, c);
        for (const t of ticks()) {
          const r = reading(samples, t);
          if (r === null) continue;
          const off = Math.abs(r - t) >= 1e6;
          text((r / 1e6).toLocaleString("en", { maximumFractionDigits: 3 }),
            { x: x(t), y: rows[i].clockY + 11, "text-anchor": "middle",
              class: "clock-reading" + (off ? " off" : "") }, c,
            lane.name + "'s clock reads " + ms(r) + " at " + ms(t) + " true time" +
            (off ? " (" + ((r - t) / 1e6).toFixed(3) + " ms off)" : ""));
        }
      }
    });
    // Faults: bands for pauses and the world's events, a line on the lane otherwise.
    const faults = el("g", { class: "faults" }, svg);
    for (const f of D.faults) {
      if (!visible(f.from, f.until)) continue;
      if (f.lane === null) {
        const b = band(f.from, f.until, 3);
        el("rect", { x: b.x, y: TOP, width: b.w, height: height - TOP - 10, class: "fault-band" },
          faults, f.what + " at " + ms(f.from));
      } else if (f.until > f.from) {
        const b = band(f.from, f.until, 2);
        el("rect", { x: b.x, y: rows[f.lane].y + 2, width: b.w, height: LANE - 4, class: "pause" },
          faults, D.lanes[f.lane].name + " " + f.what + " from " + ms(f.from) + " to " + ms(f.until));
      } else {
        el("line", { x1: x(f.from), y1: rows[f.lane].y, x2: x(f.from), y2: rows[f.lane].y + LANE,
          class: "fault" }, faults, f.what + " at " + ms(f.from));
      }
    }
    // Lock keys on the servers.
    const keys = el("g", { class: "keys" }, svg);
    const ENDED = ["expired", "removed", "held at the end"];
    const shownKeys = D.keys.filter(([, , fromUs, untilUs]) => visible(fromUs * 1000, untilUs * 1000));
    if (shownKeys.length <= KEY_DETAIL) {
      for (const [lane, epoch, fromUs, untilUs, ended] of shownKeys) {
        const from = fromUs * 1000, until = untilUs * 1000;
        const b = band(from, until, 2);
        el("rect", { x: b.x, y: rows[lane].y + 8, width: b.w, height: LANE - 16, class: "key",
          fill: epoch ? color(epoch) : "#9e9e9e" }, keys,
          () => D.lanes[lane].name + " holds the key of " +
            (epoch ? "epoch " + epoch : "a holder without a lease") + " from " + ms(from) +
            " to " + ms(until) + ": " + ENDED[ended]);
      }
    } else {
      // Too many to tell apart: one path per lane and colour, and the details once zoomed in.
      const paths = new Map();
      for (const [lane, epoch, fromUs, untilUs] of shownKeys) {
        const b = band(fromUs * 1000, untilUs * 1000, 2);
        const fill = epoch ? color(epoch) : "#9e9e9e";
        const key = lane + " " + fill;
        paths.set(key, (paths.get(key) || "") + "M" + b.x.toFixed(1) + " " + (rows[lane].y + 8) +
          "h" + b.w.toFixed(1) + "v" + (LANE - 16) + "h" + (-b.w).toFixed(1) + "z");
      }
      for (const [key, d] of paths) {
        const [lane, fill] = key.split(" ");
        el("path", { d: d, class: "key", fill: fill }, keys, shownKeys.length +
          " keys in view; zoom in to see each one's holder and end (at most " + KEY_DETAIL +
          " in view). On " + D.lanes[Number(lane)].name + ".");
      }
    }
    // Validity (dashed, top half) and believed windows (filled, bottom half) per lease.
    const leases = el("g", { class: "leases" }, svg);
    D.leases.forEach((l, i) => {
      const top = rows[l.lane].y;
      const validUntil = l.valid_until === null ? end : l.valid_until;
      const details = D.lanes[l.lane].name + ", epoch " + l.epoch + " (fence " + l.fence +
        ", token " + l.token + "): granted at " + ms(l.granted);
      if (visible(l.granted, validUntil)) {
        const b = band(l.granted, validUntil, 2);
        el("rect", { x: b.x, y: top + 3, width: b.w, height: LANE / 2 - 4, class: "validity",
          stroke: color(l.epoch), "data-lease": i }, leases,
          () => details + "\nvalidity it computed: until " + ms(l.valid_until_local) + " on its clock, read at " +
          (l.valid_until === null ? "no time before the end" : ms(l.valid_until) + " true time"));
      }
      for (const [from, until] of l.windows) {
        if (!visible(from, until)) continue;
        const b = band(from, until, 2);
        el("rect", { x: b.x, y: top + LANE / 2, width: b.w, height: LANE / 2 - 3, class: "window",
          fill: color(l.epoch), "data-lease": i }, leases,
          () => details + "\nbelieved it held the lease from " + ms(from) + " to " + ms(until) +
          (l.released !== null ? "\nreleased at " + ms(l.released) : "") +
          (l.crashed !== null ? "\ncrashed at " + ms(l.crashed) : "") +
          (l.extensions ? "\nextended " + l.extensions + " time(s)" : ""));
      }
    });
    // Overlaps: a band across every lane and a marker above.
    const overlaps = el("g", { class: "overlaps" }, svg);
    D.overlaps.forEach((o, n) => {
      const a = D.leases[o.first], b = D.leases[o.second];
      const words = D.lanes[a.lane].name + " (epoch " + a.epoch + ") and " + D.lanes[b.lane].name +
        " (epoch " + b.epoch + ") both believed they held the lease from " + ms(o.from) + " to " +
        ms(o.until) + " (" + ms(o.until - o.from) + "), cause " + o.cause +
        (o.used ? "; both used the resource inside it" : "");
      if (!visible(o.from, o.until)) return;
      const r = band(o.from, o.until, 6);
      el("rect", { x: r.x, y: TOP - 4, width: r.w, height: height - TOP - 6, class: "overlap",
        id: "overlap-" + (n + 1) }, overlaps, words);
      el("polygon", { points: (r.x + r.w / 2) + "," + (TOP - 2) + " " + (r.x + r.w / 2 - 6) + "," +
        (TOP - 12) + " " + (r.x + r.w / 2 + 6) + "," + (TOP - 12), class: "overlap-marker" }, overlaps, words);
      text("overlap " + (n + 1), { x: r.x + r.w / 2 + 8, y: TOP - 14, class: "overlap-label" }, overlaps);
    });
    // Messages (optional) and accesses.
    const resource = D.lanes.length - 1;
    if (document.getElementById("show-messages").checked) {
      const msgs = el("g", { class: "messages" }, svg);
      const shown = messages.filter(([, , sent, arrived]) =>
        visible(sent, arrived === null ? sent : arrived));
      if (shown.length <= MESSAGE_DETAIL) {
        for (const [from, to, sent, arrived, label] of shown) {
          arrow(from, to, sent, arrived, "msg", msgs, () => D.lanes[from].name + " \u2192 " +
            D.lanes[to].name + ": " + D.labels[label] + "\nsent " + ms(sent) +
            (arrived === null ? ", lost" : ", arrives " + ms(arrived)));
        }
      } else {
        // Too many to tell apart: one path of plain lines per pair of lanes, and the
        // details once zoomed in.
        // Lines that would fall on the same pixels are drawn once.
        const paths = new Map();
        const drawn = new Set();
        for (const [from, to, sent, arrived] of shown) {
          const key = from + ">" + to;
          const x0 = Math.round(x(sent)), y0 = mid(from);
          const x1 = arrived === null ? x0 + 14 : Math.round(x(arrived));
          const y1 = arrived === null ? (y0 + mid(to)) / 2 : mid(to);
          const line = key + ":" + x0 + ":" + x1 + ":" + (arrived === null);
          if (drawn.has(line)) continue;
          drawn.add(line);
          paths.set(key, (paths.get(key) || "") + "M" + x0 + " " + y0 + "L" + x1 + " " + y1);
        }
        for (const [key, d] of paths) {
          const [from, to] = key.split(">").map(Number);
          el("path", { d: d, class: "msg" }, msgs, shown.length + " messages in view; " +
            D.lanes[from].name + " \u2192 " + D.lanes[to].name + " among them. Zoom in to see " +
            "each one (at most " + MESSAGE_DETAIL + " in view).");
        }
      }
    }
    const accesses = el("g", { class: "accesses" }, svg);
    for (const a of D.accesses) {
      if (!visible(a.sent, a.arrived === null ? a.sent : a.arrived)) continue;
      arrow(a.from, resource, a.sent, a.arrived, "access " + a.fates[0], accesses,
        () => D.lanes[a.from].name + "'s " + a.kind + " #" + a.index + " (epoch " + a.epoch + ", fence " +
        a.fence + ")\nsent " + ms(a.sent) + (a.arrived === null ? ", never arrived" : ", arrives " +
        ms(a.arrived)) + "\nplain: " + a.fates[0] + ", fenced: " + a.fates[1] + ", strict: " + a.fates[2]);
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

  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const box = svg.getBoundingClientRect();
    zoom(e.deltaY < 0 ? 0.8 : 1.25, timeAt(e.clientX - box.left));
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (e) => { drag = e.clientX; svg.classList.add("dragging"); });
  window.addEventListener("mouseup", () => { drag = null; svg.classList.remove("dragging"); });
  window.addEventListener("mousemove", (e) => {
    if (drag === null) return;
    const dx = e.clientX - drag;
    drag = e.clientX;
    pan(-dx / (width() - LEFT - RIGHT) * (view.to - view.from));
  });
  svg.addEventListener("mouseover", (e) => {
    const t = tipOf(e.target);
    if (!t) { tip.hidden = true; return; }
    tip.textContent = t;
    tip.hidden = false;
  });
  svg.addEventListener("mousemove", (e) => {
    if (tip.hidden) return;
    const box = svg.parentNode.getBoundingClientRect();
    tip.style.left = (e.clientX - box.left + 14) + "px";
    tip.style.top = (e.clientY - box.top + 14) + "px";
  });
  svg.addEventListener("mouseleave", () => { tip.hidden = true; });
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

  draw();
  document.body.dataset.renderMs = (performance.now() - started).toFixed(1);
  document.body.dataset.shapes = String(svg.querySelectorAll("*").length);
})();
