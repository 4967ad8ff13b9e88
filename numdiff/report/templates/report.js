"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("numdiff-data").textContent);
  const META = DATA.meta, ROWS = DATA.rows, EVENTS = DATA.events, UNIT = META.time_unit;
  const $ = (id) => document.getElementById(id);
  const num = (v) => (v === null || v === undefined) ? null
    : v === "inf" ? Infinity : v === "-inf" ? -Infinity : v === "nan" ? NaN : v;
  const fmt = (v, digits) => {
    v = num(v);
    if (v === null) return "";
    if (Number.isNaN(v)) return "nan";
    if (!Number.isFinite(v)) return v > 0 ? "∞" : "-∞";
    if (v === 0) return "0";
    const a = Math.abs(v);
    return (a >= 1e5 || a < 1e-3) ? v.toExponential(digits || 3) : v.toPrecision(digits || 4).replace(/\.?0+$/, "");
  };
  const el = (tag, attrs, ...children) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== null && v !== undefined) e.setAttribute(k, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  };
  const PAGE = 200;  // rows drawn at first in each table; the rest on request (keeps opening fast)
  // a group's ops as one short line (numdiff._core.names.ops_title); a program of several methods: whose op
  const opName = (r) => (r.title || r.op) + (r.method ? " (" + r.method + ")" : "");
  const belowFloor = (r) => r.matched && r.floor !== null && num(r.snr) !== null && num(r.snr) < r.floor;
  // a run that may have used other inputs than the reference run: its accumulated gaps compare two inputs,
  // so being below the floor says nothing about the device (the culprit verdicts, on its own values, do)
  const inputsInDoubt = (META.inputs_in_doubt || []).length > 0;
  const methodsInDoubt = META.methods_in_doubt || [];  // several methods: only those (else the one method's rows)
  const inDoubt = (r) => inputsInDoubt && (!methodsInDoubt.length || methodsInDoubt.includes(r.method));
  const alarming = (r) => belowFloor(r) && !inDoubt(r);

  // ---- summary ----------------------------------------------------------------------------
  const matched = ROWS.filter((r) => r.matched && !Number.isNaN(num(r.snr)) && num(r.snr) !== null);
  const worstFirst = matched.slice().sort((a, b) => num(a.snr) - num(b.snr));
  const culprits = ROWS.filter((r) => r.culprit);
  const topLevel = EVENTS.filter((e) => e.top && e.p50 !== null);
  const totalP50 = topLevel.reduce((s, e) => s + e.p50, 0);
  const nums = $("summary-numbers");
  const stat = (label, value, cls) => el("div", {}, el("div", { class: "big " + (cls || "") }, value), el("div", { class: "muted" }, label));
  if (META.gap_unavailable) {
    nums.append(stat("numerical gap", "not available", "warn"), el("p", { class: "muted" }, META.gap_unavailable));
  } else {
    const below = ROWS.filter(belowFloor).length;
    const against = inputsInDoubt ? " (against the reference run on the ETRecord's inputs)"
      : META.reference_inputs === "own" ? " (against the model on the run's own inputs)" : "";
    nums.append(stat("layers compared (" + META.graph + ")", ROWS.length),
      stat("below the noise floor" + against, below, below && !inputsInDoubt ? "bad" : inputsInDoubt ? "" : "ok"),
      stat("lowest SNR (dB)" + against, worstFirst.length ? fmt(worstFirst[0].snr) : "—", below && !inputsInDoubt ? "bad" : ""));
  }
  nums.append(stat("time in ops and delegate calls (p50 sum, " + UNIT + ")", fmt(totalP50)));

  // the CLI's words: "culprit" (local error beyond noise), "inherited" (error that came from the inputs)
  const causeTag = (r) => r.cause ? el("span", { class: "cause cause-" + r.cause, title: META.cause_means[r.cause] }, r.cause) : null;
  const worstList = $("worst-list");
  // an identical layer (∞ dB) is never among the worst: there is nothing wrong with it
  const finiteWorst = worstFirst.filter((r) => num(r.snr) !== Infinity);
  const shown = culprits.length ? culprits : finiteWorst.slice(0, 5);
  if (culprits.length) $("worst-title").textContent = "Culprits (" + META.cause_means.culprit + ")";
  // one headline over every culprit view that ran (decode steps, inside delegates, broken rows...): never a
  // "no culprit" above a view that names one (analyses written before version 3 have none)
  // the note on the run's inputs follows it: what the verdicts assume, or why the first ops are not judged
  if (META.inputs_note) $("worst-title").after(el("p", { id: "inputs-note", class: "warn" }, META.inputs_note));
  if (META.culprits_headline) $("worst-title").after(el("p", { id: "culprit-headline",
    class: /within its expected noise/.test(META.culprits_headline) ? "ok" : "warn" }, META.culprits_headline));
  else if (!culprits.length && META.culprits_available && ROWS.length) $("worst-title").append(el("span", { class: "ok" }, " · no culprit: every local error is within its expected noise"));
  if (!META.culprits_available) $("worst-title").append(el("span", { class: "muted" }, " · culprits " + (META.culprits_reason || "not available")));
  shown.forEach((r, k) => {
    worstList.append(el("div", { class: "worst-item" + (alarming(r) || r.culprit ? "" : " fine"), id: k === 0 ? "worst-row" : null, "data-row": r.i, onclick: () => showDetails(r) },
      el("b", {}, "#" + (r.i + 1) + " " + opName(r)), " ", causeTag(r), " ", el("span", { class: "muted" }, r.module || ""),
      " · SNR ", el("span", { class: alarming(r) ? "bad" : "" }, fmt(r.snr) + " dB"),
      r.local !== null ? " · local " + fmt(r.local) + " · accumulated " + fmt(r.accum) : "",
      el("div", {}, el("code", {}, r.src || "(no source line)"))));
  });
  for (const c of DATA.extra_culprits) worstList.append(el("div", { class: "worst-item" }, el("b", {}, c.title), " ", c.source_line || ""));
  if (!shown.length && !DATA.extra_culprits.length) worstList.append(el("p", { class: "muted" }, META.gap_unavailable ? "No gap rows." : worstFirst.length ? "Every compared layer is identical to the reference (∞ dB)." : "No compared rows."));

  // ---- chart tooltips and clicks (the charts are SVG drawn when the report was written) --------
  const tip = $("tooltip");
  function hoverChart(id, itemAt, describe, onClick) {
    const box = $(id);
    if (!box) return;
    const g = { x0: +box.dataset.x0, x1: +box.dataset.x1, xmin: +box.dataset.xmin, xmax: +box.dataset.xmax };
    const at = (ev) => {
      const rect = box.getBoundingClientRect();
      const frac = (ev.clientX - rect.left) / rect.width;
      if (frac < g.x0 || frac > g.x1) return null;
      return itemAt(Math.round(g.xmin + (frac - g.x0) / (g.x1 - g.x0) * (g.xmax - g.xmin)));
    };
    box.addEventListener("mousemove", (ev) => {
      const item = at(ev);
      if (!item) { tip.hidden = true; return; }
      tip.replaceChildren(...describe(item).map((line, k) => k ? el("div", {}, line) : el("b", {}, line)));
      tip.style.left = (ev.clientX + 14) + "px"; tip.style.top = (ev.clientY + 14) + "px"; tip.hidden = false;
    });
    box.addEventListener("mouseleave", () => { tip.hidden = true; });
    if (onClick) box.addEventListener("click", (ev) => { const item = at(ev); if (item) onClick(item); });
  }
  const rowByIndex = new Map(ROWS.map((r) => [r.i, r]));
  hoverChart("chart-error", (k) => rowByIndex.get(k),
    (r) => ["#" + (r.i + 1) + " " + opName(r), (r.module || "") + (r.src ? " · " + r.src : ""), "SNR " + fmt(r.snr) + " dB · floor " + fmt(r.floor) + " dB",
            r.local !== null ? "local " + fmt(r.local) + " · accumulated " + fmt(r.accum) : "",
            r.cause ? r.cause + ": " + META.cause_means[r.cause] : "", "click for details"].filter(Boolean),
    (r) => showDetails(r));
  const timed = DATA.timed.map((k) => EVENTS[k]);
  hoverChart("chart-latency", (k) => timed[k],
    (e) => [e.block + " #" + e.i + " " + e.name, "p50 " + fmt(e.p50) + " " + UNIT + " (p10 " + fmt(e.p10) + ", p90 " + fmt(e.p90) + ")",
            e.backend ? (e.delegated ? "inside " : "") + e.backend : "", e.module || ""].filter(Boolean), null);

  function histogramSvg(h) {
    const W = 400, H = 200, L = 8, B = 22, n = h.counts.length, max = Math.max(...h.counts, 1);
    const ns = "http://www.w3.org/2000/svg", svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("preserveAspectRatio", "none");
    const bw = (W - 2 * L) / n;
    h.counts.forEach((c, k) => {
      const r = document.createElementNS(ns, "rect"), bh = (H - B - 6) * c / max;
      r.setAttribute("x", L + k * bw); r.setAttribute("width", Math.max(bw - 1, 1));
      r.setAttribute("y", H - B - bh); r.setAttribute("height", bh);
      const t = document.createElementNS(ns, "title");
      t.textContent = "[" + fmt(h.edges[k]) + ", " + fmt(h.edges[k + 1]) + "): " + c + " elements";
      r.append(t); svg.append(r);
    });
    [[L, "start", h.edges[0]], [W / 2, "middle", (h.edges[0] + h.edges[n]) / 2], [W - L, "end", h.edges[n]]].forEach(([x, anchor, v]) => {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", x); t.setAttribute("y", H - 6); t.setAttribute("text-anchor", anchor); t.textContent = fmt(v);
      svg.append(t);
    });
    return svg;
  }

  // ---- sortable, filterable tables -------------------------------------------------------------
  function makeTable(table, columns, rows, opts) {
    const thead = table.tHead, tbody = table.tBodies[0];
    let sortKey = null, dir = 1, visible = rows.slice(), limit = PAGE;
    const head = el("tr", {});
    columns.forEach((c) => head.append(el("th", { "data-key": c.key, title: c.title || "", onclick: () => {
      dir = sortKey === c.key ? -dir : 1; sortKey = c.key;
      for (const th of head.children) th.removeAttribute("aria-sort");
      head.querySelector('[data-key="' + c.key + '"]').setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
      render();
    } }, c.label)));
    thead.append(head);
    const key = (c, r) => { const v = c.get(r); return c.num ? num(v) : (v === null || v === undefined ? "" : String(v).toLowerCase()); };
    function render() {
      let list = rows.filter(opts.keep);
      if (sortKey !== null) {
        const c = columns.find((c) => c.key === sortKey);
        list = list.map((r, k) => [key(c, r), k, r]).sort((a, b) => {
          const va = a[0], vb = b[0];
          const ea = va === null || va === "" || Number.isNaN(va), eb = vb === null || vb === "" || Number.isNaN(vb);
          if (ea !== eb) return ea ? 1 : -1;  // empty and NaN last in both directions
          if (!ea && va !== vb) return (va < vb ? -1 : 1) * dir;
          return a[1] - b[1];
        }).map((t) => t[2]);
      }
      visible = list;
      const more = list.length > limit ? list.length - limit : 0;
      tbody.replaceChildren(...list.slice(0, limit).map((r) => {
        const tr = el("tr", { class: opts.rowClass ? opts.rowClass(r) : "", "data-row": r.i, onclick: () => opts.onClick && opts.onClick(r, tr) });
        for (const c of columns) tr.append(el("td", { class: (c.num ? "num " : "") + c.key, title: c.tip ? c.tip(r) : null }, c.fmt ? c.fmt(c.get(r), r) : (c.get(r) ?? "")));
        return tr;
      }));
      if (more) {
        tbody.append(el("tr", { class: "more" }, el("td", { colspan: columns.length },
          el("button", { type: "button", onclick: () => { limit = Infinity; render(); } }, "show the other " + more + " rows"),
          " (sorting and filtering always use every row)")));
      }
      if (opts.count) opts.count(list.length, rows.length);
    }
    render();
    return { render, visible: () => visible, showAll: () => { limit = Infinity; render(); } };
  }

  const filterBox = $("filter"), only = $("only");
  const rowText = (r) => [r.i + 1, r.ops.join(" "), r.rops.join(" "), r.module, r.match, r.note, r.src, r.method || ""].join(" ").toLowerCase();
  const rowsTable = makeTable($("rows-table"), [
    { key: "i", label: "#", num: true, get: (r) => r.i + 1 },
    { key: "op", label: "op", get: (r) => r.title || r.op, tip: (r) => r.ops.join(", "), fmt: (v, r) => (r.title || v) + (r.method ? " [" + r.method + "]" : "") },
    { key: "module", label: "module", get: (r) => r.module },
    { key: "snr", label: "SNR dB", num: true, get: (r) => r.snr, fmt: (v) => fmt(v), title: "lowest over the row's outputs" },
    { key: "floor", label: "floor dB", num: true, get: (r) => r.floor, fmt: (v) => fmt(v), tip: (r) => r.floor_src },
    { key: "local", label: "local", num: true, get: (r) => r.local, fmt: (v) => fmt(v), title: "local error: the op replayed on the runtime's own inputs" },
    { key: "cause", label: "culprit?", get: (r) => r.cause, tip: (r) => r.cause ? META.cause_means[r.cause] : "",
      title: "culprit: " + META.cause_means.culprit + "; inherited: " + META.cause_means.inherited },
    { key: "verdict", label: "verdict", get: (r) => r.verdict },
    { key: "mse", label: "MSE", num: true, get: (r) => r.mse, fmt: (v) => fmt(v) },
    { key: "l1", label: "L1", num: true, get: (r) => r.l1, fmt: (v) => fmt(v) },
    { key: "maxabs", label: "max |err|", num: true, get: (r) => r.maxabs, fmt: (v) => fmt(v) },
    { key: "match", label: "matched by", get: (r) => r.match || (r.matched ? "" : "unmatched"), tip: (r) => r.match_expl || r.note || "" },
    { key: "note", label: "note", get: (r) => r.note },
    { key: "src", label: "source line", get: (r) => r.src },
    // a delegate's row can hold hundreds of runtime ops: each name once with its count (numdiff._core.names.counted),
    // the whole list on hover and in the details panel
    { key: "rops", label: "runtime ops", get: (r) => r.rops.join(", "), tip: (r) => r.rops.join(", "), fmt: (v, r) => r.rops_title ?? v },
  ].filter((c) => !["local", "cause", "verdict"].includes(c.key) || ROWS.some((r) => r.local !== null)), ROWS, {
    keep: (r) => {
      const q = filterBox.value.trim().toLowerCase();
      if (q && !rowText(r).includes(q)) return false;
      return only.value === "all" || (only.value === "below" && belowFloor(r)) || (only.value === "unmatched" && !r.matched) || (only.value === "culprits" && r.culprit);
    },
    rowClass: (r) => [belowFloor(r) ? "below" : "", r.matched ? "" : "unmatched", r.culprit ? "culprit" : ""].join(" "),
    onClick: (r) => showDetails(r),
    count: (n, total) => { $("row-count").textContent = n + " of " + total + " rows"; },
  });
  filterBox.addEventListener("input", rowsTable.render);
  only.addEventListener("change", rowsTable.render);

  const evFilter = $("event-filter");
  const eventsTable = makeTable($("events-table"), [
    { key: "block", label: "block", get: (e) => e.block },
    { key: "i", label: "#", num: true, get: (e) => e.i + 1 },
    { key: "name", label: "event", get: (e) => e.name },
    { key: "p50", label: "p50 " + UNIT, num: true, get: (e) => e.p50, fmt: (v) => fmt(v) },
    { key: "p10", label: "p10", num: true, get: (e) => e.p10, fmt: (v) => fmt(v) },
    { key: "p90", label: "p90", num: true, get: (e) => e.p90, fmt: (v) => fmt(v) },
    { key: "runs", label: "runs", num: true, get: (e) => e.runs },
    { key: "backend", label: "delegate", get: (e) => e.backend ? (e.delegated ? "inside " : "") + e.backend : "" },
    { key: "module", label: "module", get: (e) => e.module },
    { key: "ops", label: "op types", get: (e) => e.ops.join(", ") },
  ], EVENTS, { keep: (e) => { const q = evFilter.value.trim().toLowerCase(); return !q || [e.block, e.name, e.module, e.backend, e.ops.join(" ")].join(" ").toLowerCase().includes(q); } });
  evFilter.addEventListener("input", eventsTable.render);

  // ---- per-row details -------------------------------------------------------------------------
  function statsList(title, s) {
    if (!s) return el("div", {}, el("h3", {}, title), el("p", { class: "muted" }, "no values"));
    return el("div", {}, el("h3", {}, title), el("dl", {},
      ...[["dtype", s.dtype], ["shape", s.shape.map((x) => "[" + x.join(", ") + "]").join(" ")], ["elements", s.numel],
          ["min", fmt(s.min)], ["max", fmt(s.max)], ["mean", fmt(s.mean)], ["std", fmt(s.std)], ["non-finite", s.nonfinite]]
        .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])));
  }
  function showDetails(r) {
    const box = $("details");
    box.hidden = false;
    $("details-title").textContent = "#" + (r.i + 1) + " " + r.ops.join(", ");
    for (const tr of document.querySelectorAll("#rows-table tr.selected")) tr.classList.remove("selected");
    const tr = document.querySelector('#rows-table tbody tr[data-row="' + r.i + '"]');
    if (tr) tr.classList.add("selected");
    const stats = $("details-stats");
    stats.replaceChildren(
      el("dl", {}, ...[["runtime ops", r.rops.join(", ")], ["module", r.module || ""], ["debug handle", r.handle.join(", ")],
        ["SNR dB", r.snr_all.map((v) => fmt(v)).join(", ")], ["MSE", fmt(r.mse)], ["L1", fmt(r.l1)], ["max |err|", fmt(r.maxabs)],
        ["noise floor", fmt(r.floor) + " dB (" + r.floor_src + ")"], ["matched by", (r.match || "unmatched") + (r.match_expl ? ": " + r.match_expl : "")],
        ["note", r.note || ""], ["culprit?", r.cause ? r.cause + ": " + META.cause_means[r.cause] : "no"], ["verdict", r.verdict ? r.verdict + (r.noise_units !== null ? " (local error " + fmt(r.noise_units) + " noise units" + (r.noise ? "; " + r.noise : "") + ")" : "") : "not available"], ["source", r.src || ""]].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      statsList("reference output", r.aot), statsList("runtime output", r.rt));
    $("details-trace").textContent = r.trace || "(no stack trace recorded for these ops)";
    $("chart-hist").replaceChildren(r.hist ? histogramSvg(r.hist)
      : el("p", { class: "muted" }, "No element-wise error (the two sides cannot be compared element by element)."));
    box.scrollIntoView({ behavior: "auto", block: "start" });
  }

  // ---- about ---------------------------------------------------------------------------------
  const about = $("about-body");
  const counts = META.match_counts;
  about.append(el("h3", {}, "How each runtime value was chosen"),
    el("ul", {}, ...Object.entries(META.match_explanation).map(([k, v]) => el("li", {}, el("b", {}, k), " (" + (counts[k] || 0) + " rows): " + v))));
  if (META.notes.length) about.append(el("h3", {}, "Notes"), el("ul", {}, ...META.notes.map((n) => el("li", {}, n))));
  about.append(el("h3", {}, "Inputs"), el("ul", {}, ...META.artifacts.map((a) => el("li", {}, a.role + ": " + a.name + " (" + a.size + " bytes, sha256 " + a.sha256.slice(0, 16) + "…)"))));
  about.append(el("p", { class: "muted" }, "culprits: " + (META.culprits_available ? "available" : META.culprits_reason || "not available")
    + " · analysis format " + META.format_version + " · numdiff " + META.numdiff_version));
  document.body.setAttribute("data-ready", Math.round(performance.now()));
})();
