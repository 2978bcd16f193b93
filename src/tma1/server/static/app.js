// tma1 dashboard. No build step, no dependencies, works offline.
// Every piece of data reaches the page through textContent / setAttribute on elements made
// with createElement: evidence and file names come from agents and files on disk, and
// must never be parsed as HTML.
"use strict";

(() => {
  const KINDS = [
    "stale_file_view",
    "build_broken_after_my_edit",
    "repeated_failed_build",
    "test_stuck",
    "external_modified_during_session",
    "context_pressure",
  ];
  const SVG_NS = "http://www.w3.org/2000/svg";
  const TIME_OPTS = { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" };
  const params = new URLSearchParams(window.location.search);
  // The poll interval is 10 s (design: polling, not SSE); tests may shorten it with ?poll=ms.
  const POLL_MS = Math.max(250, Number.parseInt(params.get("poll") || "10000", 10) || 10000);

  const state = {
    tab: "anomalies",
    sessionId: null,
    expanded: new Set(),
    rows: new Map(), // emit id -> {row, detail, emit}
    seenIds: new Set(),
    firstLoad: true,
    timer: null,
    busy: false,
  };

  // --- tiny DOM helpers (text only) ---------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [key, value] of Object.entries(props)) {
        if (value === undefined || value === null || value === false) continue;
        if (key === "class") node.className = value;
        else if (key === "text") node.textContent = String(value);
        else if (key === "dataset") Object.assign(node.dataset, value);
        else if (key.startsWith("on") && typeof value === "function") {
          node.addEventListener(key.slice(2), value);
        } else node.setAttribute(key, value === true ? "" : String(value));
      }
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = String(value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }

  const $ = (id) => document.getElementById(id);

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function fmtTime(ts) {
    const d = new Date(ts);
    const today = new Date();
    const time = d.toLocaleTimeString([], TIME_OPTS);
    if (d.toDateString() === today.toDateString()) return time;
    return `${d.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
  }

  function fmtFull(ts) {
    const d = new Date(ts);
    return `${d.toLocaleDateString([], { year: "numeric", month: "short", day: "numeric" })} ${d.toLocaleTimeString([], TIME_OPTS)}`;
  }

  function fmtDuration(ms) {
    const s = Math.round(ms / 1000);
    if (s < 60) return `${s}s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m}m ${s % 60}s`;
    return `${Math.floor(m / 60)}h ${m % 60}m`;
  }

  function pct(x) {
    return x === null || x === undefined ? "—" : `${Math.round(x * 100)}%`;
  }

  function shortId(id) {
    return id.length > 14 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
  }

  function humanKind(kind) {
    return kind.replaceAll("_", " ");
  }

  function verdict(pass) {
    if (pass === true) return el("span", { class: "chip pass", text: "pass" });
    if (pass === false) return el("span", { class: "chip fail", text: "fail" });
    return el("span", { class: "chip na", text: "no data", title: "nothing to judge yet" });
  }

  function emptyHelp(title) {
    const frag = $("empty-help").content.cloneNode(true);
    frag.querySelector(".help-title").textContent = title;
    return frag;
  }

  // --- network -----------------------------------------------------------------------

  async function getJSON(path) {
    const r = await fetch(path, { headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  }

  function setStatus(ok, text) {
    $("status-dot").className = ok ? "dot ok" : "dot bad";
    $("status-text").textContent = text;
  }

  // --- tabs & routing ------------------------------------------------------------------

  function route() {
    const hash = window.location.hash.replace(/^#/, "");
    const [tab, ...rest] = hash.split("/");
    state.tab = ["anomalies", "gates", "sessions"].includes(tab) ? tab : "anomalies";
    state.sessionId = state.tab === "sessions" && rest.length ? decodeURIComponent(rest.join("/")) : null;
    for (const btn of document.querySelectorAll("[role=tab]")) {
      const on = btn.dataset.tab === state.tab;
      btn.setAttribute("aria-selected", on ? "true" : "false");
      btn.tabIndex = on ? 0 : -1;
    }
    for (const view of document.querySelectorAll(".view")) {
      view.hidden = view.id !== `view-${state.tab}`;
    }
    refresh();
  }

  // --- anomalies -------------------------------------------------------------------------

  function filterQuery() {
    const q = new URLSearchParams({ limit: "200" });
    const sev = $("f-severity").value;
    const kind = $("f-kind").value;
    const channel = $("f-channel").value;
    const session = $("f-session").value.trim();
    if (sev) q.set("severity", sev);
    if (kind) q.set("kind", kind);
    if (channel) q.set("channel", channel);
    if (session) q.set("session_id", session);
    return q;
  }

  function filtersActive() {
    return Boolean(
      $("f-severity").value || $("f-kind").value || $("f-channel").value || $("f-session").value.trim()
    );
  }

  async function postLabel(emit, label) {
    const r = await fetch(`/api/anomalies/${encodeURIComponent(emit.id)}/label`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ label, source: "human" }),
    });
    if (!r.ok) throw new Error(`label: HTTP ${r.status}`);
    return r.json();
  }

  function labelButtons(entry) {
    const wrap = el("div", { class: "label-buttons", role: "group", "aria-label": "Label" });
    for (const [value, text, tip] of [
      ["tp", "TP", "true positive: a real problem worth telling the agent"],
      ["fp", "FP", "false positive: noise"],
    ]) {
      const btn = el("button", {
        type: "button",
        class: `lbl lbl-${value}`,
        text,
        title: tip,
        dataset: { label: value, tip },
        "aria-pressed": "false",
        onclick: async (ev) => {
          ev.stopPropagation();
          const current = entry.emit.label_source === "human" ? entry.emit.label : null;
          const next = current === value ? "clear" : value;
          try {
            const out = await postLabel(entry.emit, next);
            entry.emit.label = out.label;
            entry.emit.label_source = out.label ? "human" : null;
            if (!out.label) {
              const agent = entry.emit.labels && entry.emit.labels.agent;
              entry.emit.label = agent ? agent.label : null;
              entry.emit.label_source = agent ? "agent" : null;
            }
            paintLabel(entry);
            setStatus(true, `labelled #${entry.emit.id} ${out.label || "cleared"}`);
          } catch (err) {
            setStatus(false, String(err.message || err));
          }
        },
      });
      wrap.append(btn);
    }
    return wrap;
  }

  function paintLabel(entry) {
    const { emit, row } = entry;
    for (const btn of row.querySelectorAll("button.lbl")) {
      const on = emit.label === btn.dataset.label;
      btn.setAttribute("aria-pressed", on && emit.label_source === "human" ? "true" : "false");
      btn.classList.toggle("by-agent", on && emit.label_source === "agent");
      btn.title = on && emit.label_source === "agent" ? "labelled by the agent; click to confirm" : btn.dataset.tip;
    }
    row.dataset.label = emit.label || "";
  }

  function detailBlock(emit) {
    const files = emit.related_files.length
      ? el("ul", { class: "files" }, emit.related_files.map((f) => el("li", null, el("code", { text: f }))))
      : el("span", { class: "muted", text: "none" });
    const dl = el(
      "dl",
      { class: "kv" },
      el("dt", { text: "Evidence" }),
      el("dd", null, el("pre", { class: "evidence-full", text: emit.evidence })),
      el("dt", { text: "Suggestion" }),
      el("dd", { class: "suggestion", text: emit.suggestion }),
      el("dt", { text: "Related files" }),
      el("dd", null, files),
      el("dt", { text: "Channel" }),
      el("dd", null, el("code", { text: emit.channel })),
      el("dt", { text: "First emitted at" }),
      el("dd", { text: fmtFull(emit.first_emitted_at) }),
      el("dt", { text: "Emitted at" }),
      el("dd", { text: fmtFull(emit.ts) }),
      el("dt", { text: "Session" }),
      el(
        "dd",
        null,
        el("a", { href: `#sessions/${encodeURIComponent(emit.session_id)}`, text: emit.session_id }),
      ),
      el("dt", { text: "Stable key" }),
      el("dd", null, el("code", { text: emit.stable_key })),
    );
    if (emit.label_note) {
      dl.append(el("dt", { text: "Label note" }), el("dd", { text: emit.label_note }));
    }
    return dl;
  }

  function makeEmitRow(emit) {
    const entry = { emit, row: null, detail: null };
    const toggle = () => {
      const open = !state.expanded.has(emit.id);
      if (open) state.expanded.add(emit.id);
      else state.expanded.delete(emit.id);
      entry.detail.hidden = !open;
      entry.row.setAttribute("aria-expanded", open ? "true" : "false");
    };
    entry.row = el(
      "tr",
      {
        class: `emit sev-${emit.severity}`,
        dataset: { id: String(emit.id), kind: emit.kind, severity: emit.severity },
        tabindex: "0",
        "aria-expanded": "false",
        onclick: toggle,
        onkeydown: (ev) => {
          if (ev.key === "Enter" || ev.key === " ") {
            ev.preventDefault();
            toggle();
          }
        },
      },
      el("td", { class: "c-time", text: fmtTime(emit.ts), title: fmtFull(emit.ts) }),
      el("td", { class: "c-sev" }, el("span", { class: `sev sev-${emit.severity}`, text: emit.severity })),
      el("td", { class: "c-kind", text: humanKind(emit.kind) }),
      el("td", { class: "c-session", title: emit.session_id }, el("code", { text: shortId(emit.session_id) })),
      el("td", { class: "c-evidence" }, el("span", { class: "evidence", text: emit.evidence })),
      el("td", { class: "c-label" }, labelButtons(entry)),
    );
    entry.detail = el(
      "tr",
      { class: "emit-detail", hidden: true },
      el("td", { colspan: "6" }, detailBlock(emit)),
    );
    if (state.expanded.has(emit.id)) {
      entry.detail.hidden = false;
      entry.row.setAttribute("aria-expanded", "true");
    }
    paintLabel(entry);
    return entry;
  }

  function renderEmits(emits) {
    const body = $("emits-body");
    const wanted = new Set(emits.map((e) => e.id));
    for (const [id, entry] of state.rows) {
      if (!wanted.has(id)) {
        entry.row.remove();
        entry.detail.remove();
        state.rows.delete(id);
      }
    }
    for (const emit of emits) {
      let entry = state.rows.get(emit.id);
      if (!entry) {
        entry = makeEmitRow(emit);
        if (!state.firstLoad && !state.seenIds.has(emit.id)) {
          const row = entry.row;
          row.classList.add("fresh");
          setTimeout(() => row.classList.remove("fresh"), 8000);
        }
        state.rows.set(emit.id, entry);
      } else {
        entry.emit = emit;
        paintLabel(entry);
      }
      state.seenIds.add(emit.id);
      body.append(entry.row, entry.detail); // append moves existing nodes into order
    }
    state.firstLoad = false;
    const empty = $("anomalies-empty");
    $("emits-table").hidden = emits.length === 0;
    empty.hidden = emits.length !== 0;
    clear(empty);
    if (emits.length === 0) {
      if (filtersActive()) {
        empty.append(el("div", { class: "help" }, el("p", { class: "help-title", text: "No anomalies match these filters." })));
      } else {
        empty.append(emptyHelp("No anomalies yet — nothing has gone wrong, or no agent is wired."));
      }
    }
    const byAgent = emits.some((e) => e.label_source === "agent");
    $("emit-count").textContent = `${emits.length} shown${byAgent ? " · dashed label = the agent's verdict" : ""}`;
  }

  async function refreshAnomalies() {
    const data = await getJSON(`/api/anomalies?${filterQuery()}`);
    renderEmits(data.emits);
  }

  // --- gates -----------------------------------------------------------------------------

  function numberInput(id, fallback) {
    const v = Number.parseInt($(id).value, 10);
    return Number.isFinite(v) ? v : fallback;
  }

  function budgetChart(kind, budget) {
    const days = budget.day_labels;
    const counts = days.map((d) => {
      const cell = budget.per_day.find((c) => c.day === d && c.kind === kind);
      return cell ? cell.count : 0;
    });
    const line = budget.budget;
    const top = Math.max(line * 1.5, ...counts, 1);
    const W = 240;
    const H = 72;
    const pad = 2;
    const slot = (W - pad * 2) / days.length;
    const y = (v) => H - (v / top) * (H - 6);
    const chart = svg("svg", {
      viewBox: `0 0 ${W} ${H + 14}`,
      class: "budget-chart",
      role: "img",
      "aria-label": `${humanKind(kind)}: emits per day against a budget of ${line}`,
    });
    counts.forEach((n, i) => {
      const x = pad + i * slot + slot * 0.18;
      const h = Math.max(n ? 2 : 0, H - y(n));
      const bar = svg(
        "rect",
        { x, y: H - h, width: slot * 0.64, height: h, rx: 2, class: n > line ? "bar over" : "bar" },
        svg("title", { text: `${days[i]}: ${n} emit${n === 1 ? "" : "s"}` }),
      );
      chart.append(bar);
      if (n > 0) {
        chart.append(svg("text", { x: x + slot * 0.32, y: H - h - 2, class: "bar-n", "text-anchor": "middle", text: n }));
      }
      chart.append(
        svg("text", { x: pad + i * slot + slot / 2, y: H + 12, class: "axis", "text-anchor": "middle", text: days[i].slice(5) }),
      );
    });
    chart.append(svg("line", { x1: 0, x2: W, y1: y(line), y2: y(line), class: "budget-line" }));
    chart.append(svg("text", { x: W - 2, y: y(line) - 3, class: "budget-label", "text-anchor": "end", text: `budget ${line}` }));
    return chart;
  }

  function meter(value, target, label) {
    const wrap = el("div", { class: "meter", role: "img", "aria-label": `${label}: ${pct(value)} (target ${pct(target)})` });
    const fill = el("div", { class: `meter-fill ${value === null ? "none" : value >= target ? "ok" : "low"}` });
    fill.style.width = `${Math.round((value || 0) * 100)}%`;
    const mark = el("div", { class: "meter-target", title: `target ${pct(target)}` });
    mark.style.left = `${Math.round(target * 100)}%`;
    wrap.append(fill, mark);
    return wrap;
  }

  function gateRow(name, valueText, pass, bar) {
    return el(
      "div",
      { class: "gate-row", dataset: { gate: name } },
      el("div", { class: "gate-head" }, el("span", { class: "gate-name", text: name }), verdict(pass)),
      bar,
      el("div", { class: "gate-value", text: valueText }),
    );
  }

  function renderGates(b, f, p) {
    const summary = $("gate-summary");
    clear(summary);
    const overall = [
      ["Daily budget", b.pass, `≤ ${b.budget} / kind / day`],
      ["Follow-rate", f.pass, `≥ ${pct(f.target)} within ${f.window} tool calls`],
      ["Precision", p.human.overall.pass, `≥ ${pct(p.target)} TP (human labels)`],
    ];
    for (const [name, pass, target] of overall) {
      summary.append(
        el("div", { class: `summary-card ${pass === true ? "pass" : pass === false ? "fail" : "na"}` },
          el("div", { class: "summary-name", text: name }),
          verdict(pass),
          el("div", { class: "summary-target muted", text: target })),
      );
    }
    const po = p.human.overall;
    summary.append(
      el("div", { class: "summary-card na" },
        el("div", { class: "summary-name", text: "Labelled" }),
        el("div", { class: "big", text: `${po.labelled}` }),
        el("div", { class: "summary-target muted", text: `human · agent ${p.agent.overall.labelled}` })),
    );

    const cards = $("gate-cards");
    clear(cards);
    const totalEmits = Object.values(b.kinds).reduce((n, k) => n + k.total, 0);
    const empty = $("gates-empty");
    clear(empty);
    empty.hidden = totalEmits !== 0;
    if (totalEmits === 0) empty.append(emptyHelp(`No emits in the last ${b.days} day(s) — the gates have nothing to judge yet.`));

    const kinds = [...new Set([...KINDS, ...Object.keys(b.kinds)])];
    for (const kind of kinds) {
      const bk = b.kinds[kind] || { total: 0, max_per_day: 0, days_over: 0, pass: true };
      const fk = f.kinds[kind] || { emits: 0, followed: 0, rate: null, pass: null, action: "" };
      const hk = p.human.kinds[kind] || { tp: 0, fp: 0, labelled: 0, precision: null, pass: null };
      const ak = p.agent.kinds[kind] || { tp: 0, fp: 0, labelled: 0, precision: null, pass: null };
      const fails = [bk.pass, fk.pass, hk.pass].filter((x) => x === false).length;
      const card = el(
        "article",
        { class: `card ${fails ? "has-fail" : ""}`, dataset: { kind } },
        el("header", null, el("h3", { text: humanKind(kind) }), el("span", { class: "muted", text: `${bk.total} emit${bk.total === 1 ? "" : "s"}` })),
        gateRow(
          "budget",
          `max ${bk.max_per_day}/day · ${bk.days_over} day(s) over`,
          bk.pass,
          budgetChart(kind, b),
        ),
        gateRow(
          "follow-rate",
          fk.emits ? `${pct(fk.rate)} · ${fk.followed}/${fk.emits} followed — ${fk.action}` : `no emits — ${fk.action}`,
          fk.pass,
          meter(fk.rate, f.target, "follow-rate"),
        ),
        gateRow(
          "precision",
          hk.labelled
            ? `${pct(hk.precision)} · ${hk.tp} TP / ${hk.fp} FP` + (ak.labelled ? ` · agent ${pct(ak.precision)} (${ak.tp}/${ak.fp})` : "")
            : ak.labelled
              ? `no human labels · agent ${pct(ak.precision)} (${ak.tp} TP / ${ak.fp} FP)`
              : "no labels yet — judge emits with TP/FP",
          hk.pass,
          meter(hk.precision, p.target, "precision"),
        ),
      );
      cards.append(card);
    }
  }

  async function refreshGates() {
    const days = numberInput("g-days", 7);
    const budget = numberInput("g-budget", 5);
    const windowSize = numberInput("g-window", 5);
    const [b, f, p] = await Promise.all([
      getJSON(`/api/anomalies/budget?days=${days}&budget=${budget}`),
      getJSON(`/api/anomalies/follow-rate?days=${days}&window=${windowSize}`),
      getJSON(`/api/anomalies/precision?days=${days}`),
    ]);
    renderGates(b, f, p);
  }

  // --- sessions --------------------------------------------------------------------------

  function renderSessions(list) {
    const body = $("sessions-body");
    clear(body);
    const ids = $("session-ids");
    clear(ids);
    for (const s of list) {
      ids.append(el("option", { value: s.session_id }));
      const open = () => {
        window.location.hash = `#sessions/${encodeURIComponent(s.session_id)}`;
      };
      body.append(
        el(
          "tr",
          {
            class: "session-row",
            tabindex: "0",
            dataset: { session: s.session_id },
            onclick: open,
            onkeydown: (ev) => {
              if (ev.key === "Enter") open();
            },
          },
          el("td", null,
            el("div", { class: "project", text: s.project || "(unknown project)" }),
            el("code", { class: "muted small", text: s.session_id })),
          el("td", { text: s.agent_source }),
          el("td", { text: fmtTime(s.start_ts), title: fmtFull(s.start_ts) }),
          el("td", { class: "num", text: fmtDuration(s.duration_ms) }),
          el("td", { class: "num", text: s.tool_calls }),
          el("td", { class: `num ${s.failures ? "warn" : ""}`, text: s.failures }),
          el("td", { class: `num ${s.anomalies ? "alert" : ""}`, text: s.anomalies }),
        ),
      );
    }
    $("sessions-table").hidden = list.length === 0;
    const empty = $("sessions-empty");
    clear(empty);
    empty.hidden = list.length !== 0;
    if (list.length === 0) empty.append(emptyHelp("No sessions yet — no hook event has reached tma1."));
  }

  function timelineStrip(detail) {
    const items = detail.timeline;
    const emits = detail.emits;
    const times = [...items.map((i) => i.ts), ...items.map((i) => i.end_ts || i.ts), ...emits.map((e) => e.ts)];
    const start = Math.min(...times);
    const end = Math.max(...times);
    const span = Math.max(end - start, 1);
    const at = (ts) => `${(((ts - start) / span) * 98 + 1).toFixed(3)}%`;
    const strip = el("div", { class: "timeline", role: "img", "aria-label": "session timeline" });
    const lanes = {
      anomalies: el("div", { class: "lane lane-anomalies" }, el("span", { class: "lane-label", text: "anomalies" })),
      tools: el("div", { class: "lane lane-tools" }, el("span", { class: "lane-label", text: "tool calls" })),
    };
    for (const it of items) {
      if (it.type !== "tool") {
        const m = el("span", { class: "tl-event", title: `${it.event} · ${fmtFull(it.ts)}` });
        m.style.left = at(it.ts);
        lanes.tools.append(m);
        continue;
      }
      const what = it.command || it.file || "";
      const tick = el("span", {
        class: `tl-tool ${it.failed ? "failed" : ""}`,
        title: `${it.tool_name || "tool"}${what ? `: ${what}` : ""}${it.failed ? ` — failed${it.error ? `: ${it.error}` : ""}` : ""}`,
        dataset: { tool: it.tool_name || "" },
      });
      tick.style.left = at(it.ts);
      lanes.tools.append(tick);
    }
    for (const e of emits) {
      const m = el("span", {
        class: `tl-marker anomaly sev-${e.severity}`,
        title: `${humanKind(e.kind)} (${e.severity}) · ${fmtFull(e.ts)}\n${e.evidence}`,
        dataset: { id: String(e.id) },
        role: "button",
        tabindex: "0",
        text: "◆",
        onclick: () => {
          const li = document.querySelector(`li.ev-anomaly[data-id="${CSS.escape(String(e.id))}"]`);
          if (!li) return;
          li.scrollIntoView({ block: "nearest", behavior: "smooth" });
          li.classList.remove("flash");
          void li.offsetWidth; // restart the animation
          li.classList.add("flash");
        },
      });
      m.style.left = at(e.ts);
      lanes.anomalies.append(m);
    }
    strip.append(
      lanes.anomalies,
      lanes.tools,
      el("div", { class: "axis-row" },
        el("span", { text: fmtTime(start) }),
        el("span", { text: `${fmtDuration(end - start)} shown` }),
        el("span", { text: fmtTime(end) })),
    );
    return strip;
  }

  function timelineList(detail) {
    const merged = [
      ...detail.timeline.map((i) => ({ ts: i.ts, order: 0, item: i })),
      ...detail.emits.map((e) => ({ ts: e.ts, order: 1, emit: e })),
    ].sort((a, b) => a.ts - b.ts || a.order - b.order);
    const list = el("ol", { class: "events" });
    for (const m of merged.slice(-300)) {
      if (m.emit) {
        const e = m.emit;
        list.append(
          el("li", { class: `ev ev-anomaly sev-${e.severity}`, dataset: { id: String(e.id) } },
            el("span", { class: "ev-time", text: fmtTime(e.ts) }),
            el("span", { class: `sev sev-${e.severity}`, text: e.severity }),
            el("strong", { text: humanKind(e.kind) }),
            el("span", { class: "ev-text", text: e.evidence })),
        );
      } else if (m.item.type === "tool") {
        const it = m.item;
        list.append(
          el("li", { class: `ev ev-tool ${it.failed ? "failed" : ""}` },
            el("span", { class: "ev-time", text: fmtTime(it.ts) }),
            el("span", { class: "tool-name", text: it.tool_name || "tool" }),
            el("code", { class: "ev-text", text: it.command || it.file || "" }),
            it.failed ? el("span", { class: "chip fail", text: it.failure_kind === "masked" ? "failed (masked)" : "failed" }) : null,
            it.failed && it.error ? el("span", { class: "ev-error", text: it.error }) : null),
        );
      } else {
        list.append(
          el("li", { class: "ev ev-other" },
            el("span", { class: "ev-time", text: fmtTime(m.item.ts) }),
            el("span", { class: "muted", text: m.item.event })),
        );
      }
    }
    return list;
  }

  function renderSessionDetail(detail) {
    const box = $("session-detail");
    clear(box);
    const s = detail.session;
    box.append(
      el("div", { class: "detail-head" },
        el("a", { href: "#sessions", class: "back", text: "← all sessions" }),
        el("h2", { text: s.project || "(unknown project)" }),
        el("code", { class: "muted", text: s.session_id })),
      el("div", { class: "stats" },
        stat("agent", s.agent_source),
        stat("started", fmtFull(s.start_ts)),
        stat("duration", fmtDuration(s.duration_ms)),
        stat("tool calls", s.tool_calls),
        stat("failures", s.failures, s.failures ? "warn" : ""),
        stat("anomalies", s.anomalies, s.anomalies ? "alert" : "")),
      timelineStrip(detail),
      el("div", { class: "legend muted" },
        el("span", { class: "legend-item" }, el("span", { class: "tl-tool" }), " tool call"),
        el("span", { class: "legend-item" }, el("span", { class: "tl-tool failed" }), " failed"),
        el("span", { class: "legend-item" }, el("span", { class: "tl-marker anomaly sev-high", text: "◆" }), " anomaly emitted")),
      timelineList(detail),
    );
  }

  function stat(name, value, cls) {
    return el("div", { class: `stat ${cls || ""}` }, el("div", { class: "stat-v", text: value }), el("div", { class: "stat-k", text: name }));
  }

  async function refreshSessions() {
    if (state.sessionId) {
      const r = await fetch(`/api/sessions/${encodeURIComponent(state.sessionId)}`);
      $("sessions-table").hidden = true;
      $("sessions-empty").hidden = true;
      $("session-detail").hidden = false;
      if (r.status === 404) {
        clear($("session-detail"));
        $("session-detail").append(
          el("a", { href: "#sessions", class: "back", text: "← all sessions" }),
          el("p", { class: "empty-line", text: "No events for this session." }),
        );
        return;
      }
      if (!r.ok) throw new Error(`session: HTTP ${r.status}`);
      renderSessionDetail(await r.json());
      return;
    }
    $("session-detail").hidden = true;
    renderSessions(await getJSON("/api/sessions?limit=200"));
  }

  // --- refresh loop ------------------------------------------------------------------------

  async function refresh() {
    if (state.busy) return;
    state.busy = true;
    try {
      if (state.tab === "anomalies") await refreshAnomalies();
      else if (state.tab === "gates") await refreshGates();
      else await refreshSessions();
      setStatus(true, `updated ${new Date().toLocaleTimeString([], TIME_OPTS)}`);
    } catch (err) {
      setStatus(false, `cannot reach tma1 (${err.message || err})`);
    } finally {
      state.busy = false;
    }
  }

  async function loadSessionIds() {
    try {
      const list = await getJSON("/api/sessions?limit=200");
      const ids = $("session-ids");
      clear(ids);
      for (const s of list) ids.append(el("option", { value: s.session_id }));
    } catch (_err) {
      // the datalist is a convenience; the poll reports connectivity
    }
  }

  function init() {
    const kindSel = $("f-kind");
    for (const k of KINDS) kindSel.append(el("option", { value: k, text: humanKind(k) }));
    for (const id of ["f-severity", "f-kind", "f-channel"]) $(id).addEventListener("change", refresh);
    let debounce = null;
    $("f-session").addEventListener("input", () => {
      clearTimeout(debounce);
      debounce = setTimeout(refresh, 300);
    });
    $("filters").addEventListener("submit", (ev) => {
      ev.preventDefault();
      refresh();
    });
    $("gate-params").addEventListener("change", refresh);
    $("gate-params").addEventListener("submit", (ev) => {
      ev.preventDefault();
      refresh();
    });
    for (const btn of document.querySelectorAll("[role=tab]")) {
      btn.addEventListener("click", () => {
        window.location.hash = `#${btn.dataset.tab}`;
      });
    }
    window.addEventListener("hashchange", route);
    document.body.dataset.poll = String(POLL_MS);
    route();
    loadSessionIds();
    state.timer = setInterval(refresh, POLL_MS);
  }

  init();
})();
