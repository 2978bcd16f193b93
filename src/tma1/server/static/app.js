// tma1 dashboard. No build step, no dependencies, works offline.
// Every piece of data reaches the page through textContent / setAttribute on elements made
// with createElement: evidence and file names come from agents and files on disk, and
// must never be parsed as HTML.
"use strict";

(() => {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const TIME_OPTS = { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" };
  const params = new URLSearchParams(window.location.search);
  // The poll interval is 10 s (design: polling, not SSE); tests may shorten it with ?poll=ms.
  const POLL_MS = Math.max(250, Number.parseInt(params.get("poll") || "10000", 10) || 10000);

  const SESSION_PAGE = 50;
  const state = {
    tab: "anomalies",
    sessionId: null,
    sessionPage: 0,
    lastDetail: null,
    lastPreview: null, // GET /api/anomalies/preview for the open session
    delivered: new Map(), // emit id -> delivered text (promise)
    skipped: new Set(), // emit ids skipped in the review queue
    reviewing: null,
    lastHash: {}, // tab -> its last hash (filters kept when switching tabs)
    showAllEvents: false,
    flash: null, // {id, until}: the finding a timeline marker points at, lit for 1.2 s
    expanded: new Set(),
    rows: new Map(), // emit id -> {row, detail, emit}
    seenIds: new Set(),
    firstLoad: true,
    timer: null,
    busy: false,
    // Every rule's kind, in the registry's order: GET /api/anomalies/kinds (null until it
    // answered; a rule added to the engine shows here with nothing else changed).
    kinds: null,
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

  // A figure's verdict: pass, fail, "not enough data (n = …)" below the minimum sample,
  // or "no data". `fig` is a gate figure ({status, n, min_n}) or a bare pass value.
  function verdict(fig) {
    const f = fig !== null && typeof fig === "object" ? fig : { pass: fig };
    const status = f.status || (f.pass === true ? "pass" : f.pass === false ? "fail" : "no_data");
    if (status === "pass") return el("span", { class: "chip pass", text: "pass" });
    if (status === "fail") return el("span", { class: "chip fail", text: "fail" });
    if (status === "not_enough_data") {
      return el("span", {
        class: "chip na enough",
        text: `not enough data (n = ${f.n})`,
        title: `no verdict below ${f.min_n}: a rate over ${f.n} says nothing yet`,
      });
    }
    return el("span", { class: "chip na", text: "no data", title: "nothing to judge yet" });
  }

  function statusClass(fig) {
    const st = fig && fig.status;
    return st === "pass" ? "pass" : st === "fail" ? "fail" : "na";
  }

  function emptyHelp(title) {
    const frag = $("empty-help").content.cloneNode(true);
    frag.querySelector(".help-title").textContent = title;
    return frag;
  }

  // --- network -----------------------------------------------------------------------

  // Every API call goes through here: the server answers data only to a session cookie
  // (set by the one-time login URL `tma1 serve` and `tma1 doctor` print), and a 401/403
  // says so on the page rather than as a broken view.
  async function api(path, init) {
    const r = await fetch(path, init);
    if (r.status === 401 || r.status === 403) {
      $("login-needed").hidden = false;
      setStatus(false, "not logged in");
    }
    return r;
  }

  async function getJSON(path) {
    const r = await api(path, { headers: { Accept: "application/json" } });
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  }

  // The "team" box: every machine's rows of a shared database (issue 30), on the reads a
  // person looks at; what an agent hears stays this machine's whatever the box says.
  function scoped(path) {
    const box = $("team-scope");
    if (!box || !box.checked) return path;
    return `${path}${path.includes("?") ? "&" : "?"}scope=team`;
  }

  function setStatus(ok, text) {
    $("status-dot").className = ok ? "dot ok" : "dot bad";
    $("status-text").textContent = text;
  }

  // --- tabs & routing ------------------------------------------------------------------

  // The URL keeps the view and its filters: `#anomalies?severity=high&kind=…&session=…`,
  // `#sessions?q=…&page=2`, `#sessions/<id>`, `#gates?days=7&budget=5&window=5`. Every
  // change of a filter writes the hash (one history entry), so reload and back/forward
  // restore it.
  const FILTER_INPUTS = {
    anomalies: { severity: "f-severity", kind: "f-kind", channel: "f-channel", session: "f-session" },
    sessions: { q: "s-search" },
    gates: { days: "g-days", budget: "g-budget", window: "g-window" },
  };
  const GATE_DEFAULTS = { days: "7", budget: "5", window: "5" };

  function parseHash() {
    const raw = window.location.hash.replace(/^#/, "");
    const q = raw.indexOf("?");
    const path = q < 0 ? raw : raw.slice(0, q);
    const query = new URLSearchParams(q < 0 ? "" : raw.slice(q + 1));
    const [tab, ...rest] = path.split("/");
    return { tab, rest, query };
  }

  function hashFor(tab) {
    const q = new URLSearchParams();
    for (const [key, id] of Object.entries(FILTER_INPUTS[tab] || {})) {
      const v = $(id).value.trim();
      if (v && !(tab === "gates" && GATE_DEFAULTS[key] === v)) q.set(key, v);
    }
    if (tab === "sessions" && state.sessionPage > 0) q.set("page", String(state.sessionPage + 1));
    const qs = q.toString();
    return `#${tab}${qs ? `?${qs}` : ""}`;
  }

  function saveFilters() {
    const next = hashFor(state.tab);
    if (window.location.hash !== next) window.location.hash = next; // -> hashchange -> route
    else refresh();
  }

  function route() {
    const { tab, rest, query } = parseHash();
    state.tab = ["anomalies", "gates", "sessions"].includes(tab) ? tab : "anomalies";
    state.sessionId = state.tab === "sessions" && rest.length ? decodeURIComponent(rest.join("/")) : null;
    state.lastHash[state.tab] = window.location.hash || `#${state.tab}`;
    if (state.tab === "sessions" && !state.sessionId) state.lastHash.sessionsList = state.lastHash.sessions;
    const inputs = FILTER_INPUTS[state.tab];
    for (const [key, id] of Object.entries(inputs)) {
      const input = $(id);
      const v = query.get(key) ?? (state.tab === "gates" ? GATE_DEFAULTS[key] : "");
      if (input.tagName === "SELECT" && ![...input.options].some((o) => o.value === v)) input.value = "";
      else input.value = v;
    }
    if (state.tab === "sessions") {
      const page = Number.parseInt(query.get("page") || "1", 10);
      state.sessionPage = Number.isFinite(page) && page > 1 ? page - 1 : 0;
    }
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

  async function postLabel(emit, label, note) {
    const r = await api(`/api/anomalies/${encodeURIComponent(emit.id)}/label`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ label, source: "human", note: note || null }),
    });
    if (!r.ok) throw new Error(`label: HTTP ${r.status}`);
    return r.json();
  }

  function humanNote(emit) {
    const human = emit.labels && emit.labels.human;
    return human ? human.note || "" : "";
  }

  // Every emit shown anywhere (table, timeline, review card) is one object per id, so a
  // label set in one place shows in the others at once.
  const emitsById = new Map();

  function shared(emit) {
    const known = emitsById.get(emit.id);
    if (known) {
      Object.assign(known, emit);
      return known;
    }
    emitsById.set(emit.id, emit);
    return emit;
  }

  async function applyLabel(emit, next, note) {
    const out = await postLabel(emit, next, note);
    emit.labels = { ...(emit.labels || {}) };
    if (out.label) {
      emit.labels.human = { label: out.label, note: note || null, ts: Date.now() };
      emit.label = out.label;
      emit.label_source = "human";
      emit.label_note = note || null;
    } else {
      delete emit.labels.human;
      const agent = emit.labels.agent;
      emit.label = agent ? agent.label : null;
      emit.label_source = agent ? "agent" : null;
      emit.label_note = agent ? agent.note : null;
    }
    repaintLabels(emit.id);
    setStatus(true, `labelled #${emit.id} ${out.label || "cleared"}${note ? " with a note" : ""}`);
    return out;
  }

  // TP / FP buttons (and, with `withNote`, a note field and a "save note" button) for one
  // emit. `onLabelled` runs after a successful label (the review queue moves on).
  function labelControls(emit, { withNote = false, onLabelled = null } = {}) {
    const wrap = el("div", {
      class: `label-buttons${withNote ? " with-note" : ""}`,
      role: "group",
      "aria-label": `Label emit #${emit.id}`,
      dataset: { for: String(emit.id) },
      onclick: (ev) => ev.stopPropagation(),
      onkeydown: (ev) => ev.stopPropagation(),
    });
    let noteInput = null;
    if (withNote) {
      noteInput = el("input", {
        type: "text",
        class: "label-note",
        maxlength: "4000",
        placeholder: "note (why TP / FP)",
        "aria-label": `note for emit #${emit.id}`,
      });
      noteInput.value = humanNote(emit);
    }
    for (const [value, text, tip] of [
      ["tp", "TP", "true positive: a real problem worth telling the agent"],
      ["fp", "FP", "false positive: noise"],
    ]) {
      wrap.append(
        el("button", {
          type: "button",
          class: `lbl lbl-${value}`,
          text,
          title: tip,
          dataset: { label: value, tip },
          "aria-pressed": "false",
          onclick: async (ev) => {
            ev.stopPropagation();
            const current = emit.label_source === "human" ? emit.label : null;
            const note = noteInput ? noteInput.value.trim() : humanNote(emit);
            // A click on the pressed button clears it, unless a new note is being saved.
            const next = current === value && note === humanNote(emit) ? "clear" : value;
            try {
              await applyLabel(emit, next, next === "clear" ? "" : note);
              if (onLabelled) onLabelled(emit);
            } catch (err) {
              setStatus(false, String(err.message || err));
            }
          },
        }),
      );
    }
    if (noteInput) {
      const save = el("button", {
        type: "button",
        class: "lbl lbl-note",
        text: "save note",
        title: "keep this note with the current TP/FP label",
        onclick: async (ev) => {
          ev.stopPropagation();
          if (emit.label_source !== "human" || !emit.label) {
            setStatus(false, `label #${emit.id} TP or FP first, then the note is kept with it`);
            return;
          }
          try {
            await applyLabel(emit, emit.label, noteInput.value.trim());
          } catch (err) {
            setStatus(false, String(err.message || err));
          }
        },
      });
      noteInput.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter") {
          ev.preventDefault();
          save.click();
        }
      });
      wrap.prepend(noteInput);
      wrap.append(save);
    }
    paintControls(wrap, emit);
    return wrap;
  }

  function paintControls(wrap, emit) {
    for (const btn of wrap.querySelectorAll("button.lbl[data-label]")) {
      const on = emit.label === btn.dataset.label;
      btn.setAttribute("aria-pressed", on && emit.label_source === "human" ? "true" : "false");
      btn.classList.toggle("by-agent", on && emit.label_source === "agent");
      btn.title = on && emit.label_source === "agent" ? "labelled by the agent; click to confirm" : btn.dataset.tip;
    }
    const note = wrap.querySelector("input.label-note");
    if (note && document.activeElement !== note) note.value = humanNote(emit);
  }

  function repaintLabels(id) {
    const emit = emitsById.get(id);
    if (!emit) return;
    for (const wrap of document.querySelectorAll(`.label-buttons[data-for="${CSS.escape(String(id))}"]`)) {
      paintControls(wrap, emit);
    }
    for (const node of document.querySelectorAll(`[data-id="${CSS.escape(String(id))}"].emit, li.ev-anomaly[data-id="${CSS.escape(String(id))}"]`)) {
      node.dataset.label = emit.label || "";
    }
    for (const dd of document.querySelectorAll(`dd.label-note-text[data-for="${CSS.escape(String(id))}"]`)) {
      dd.textContent = emit.label_note || "—";
    }
  }

  function deliveredText(emit) {
    let p = state.delivered.get(emit.id);
    if (!p) {
      p = getJSON(`/api/anomalies/${encodeURIComponent(emit.id)}/delivered`);
      state.delivered.set(emit.id, p);
      p.catch(() => state.delivered.delete(emit.id));
    }
    return p;
  }

  // The digest / Stop reason as the agent got it, filled in when the server answers.
  function deliveredBlock(emit) {
    const pre = el("pre", { class: "delivered", text: "loading…", dataset: { for: String(emit.id) } });
    const note = el("div", { class: "muted small delivered-note" });
    deliveredText(emit)
      .then((d) => {
        pre.textContent = d.text;
        const others = d.delivered_with.filter((x) => x !== emit.id);
        note.textContent =
          `${d.as === "stop_reason" ? "Stop reason" : "context digest"} on ${d.channel}` +
          (others.length ? ` · delivered together with ${others.map((x) => `#${x}`).join(", ")}` : "") +
          " · rebuilt from the emit log";
      })
      .catch((err) => {
        pre.textContent = `(not available: ${err.message || err})`;
      });
    return el("div", { class: "delivered-wrap" }, pre, note);
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
    dl.append(
      el("dt", { text: "Label note" }),
      el("dd", { class: "label-note-text", dataset: { for: String(emit.id) }, text: emit.label_note || "—" }),
      el("dt", { text: "Label" }),
      el("dd", null, labelControls(emit, { withNote: true })),
    );
    return el("div", { class: "finding" }, dl, el("div", { class: "delivered-col" },
      el("div", { class: "delivered-title", text: "Delivered to the agent" }),
      deliveredBlock(emit)));
  }

  function makeEmitRow(emit) {
    const entry = { emit, row: null, detail: null };
    const toggle = () => {
      const open = !state.expanded.has(emit.id);
      if (open) state.expanded.add(emit.id);
      else state.expanded.delete(emit.id);
      showDetail(entry, open);
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
      el("td", { class: "c-id", text: `#${emit.id}`, title: `emit id ${emit.id} (tma1 label ${emit.id} tp|fp)` }),
      el("td", { class: "c-time", text: fmtTime(emit.ts), title: fmtFull(emit.ts) }),
      el("td", { class: "c-sev" }, el("span", { class: `sev sev-${emit.severity}`, text: emit.severity })),
      el("td", { class: "c-kind", text: humanKind(emit.kind) }),
      el("td", { class: "c-session", title: emit.session_id }, el("code", { text: shortId(emit.session_id) })),
      el("td", { class: "c-evidence" }, el("span", { class: "evidence", text: emit.evidence })),
      el("td", { class: "c-label" }, labelControls(emit)),
    );
    entry.detail = el("tr", { class: "emit-detail", hidden: true }, el("td", { colspan: "7" }));
    if (state.expanded.has(emit.id)) showDetail(entry, true);
    entry.row.dataset.label = emit.label || "";
    return entry;
  }

  function showDetail(entry, open) {
    const cell = entry.detail.firstChild;
    if (open && !cell.firstChild) cell.append(detailBlock(entry.emit));
    entry.detail.hidden = !open;
    entry.row.setAttribute("aria-expanded", open ? "true" : "false");
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
    for (const raw of emits) {
      const emit = shared(raw);
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
        repaintLabels(emit.id);
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
    const data = await getJSON(scoped(`/api/anomalies?${filterQuery()}`));
    renderEmits(data.emits);
  }

  // --- the review queue: the newest emits without a human label, one at a time -----------

  async function nextUnlabelled() {
    const box = $("review");
    box.hidden = false;
    clear(box);
    box.append(el("p", { class: "muted", text: "looking for the next unlabelled finding…" }));
    let data;
    try {
      data = await getJSON("/api/anomalies/sample?n=200");
    } catch (err) {
      clear(box);
      box.append(el("p", { class: "error-line", text: `Cannot reach tma1: ${err.message || err}` }));
      return;
    }
    const todo = data.emits.filter((e) => !state.skipped.has(e.id));
    clear(box);
    if (!todo.length) {
      state.reviewing = null;
      box.append(
        el("div", { class: "review-head" },
          el("strong", { text: "Nothing left to label" }),
          el("button", { type: "button", class: "btn", text: "close", onclick: closeReview })),
        el("p", { class: "muted", text: state.skipped.size ? `${state.skipped.size} skipped in this visit.` : "Every emit has a human label." }),
      );
      return;
    }
    const emit = shared(todo[0]);
    state.reviewing = emit.id;
    box.dataset.id = String(emit.id);
    box.append(
      el("div", { class: "review-head" },
        el("strong", { text: `Review #${emit.id}` }),
        el("span", { class: `sev sev-${emit.severity}`, text: emit.severity }),
        el("span", { class: "review-kind", text: humanKind(emit.kind) }),
        el("span", { class: "muted small", text: `${todo.length} unlabelled${data.emits.length >= 200 ? "+" : ""}` }),
        el("span", { class: "spacer" }),
        el("button", {
          type: "button",
          class: "btn",
          id: "review-skip",
          text: "skip",
          onclick: () => {
            state.skipped.add(emit.id);
            nextUnlabelled();
          },
        }),
        el("button", { type: "button", class: "btn", text: "close", onclick: closeReview })),
      detailBlock(emit),
    );
    // The review card's own label controls move on to the next finding once labelled.
    const controls = box.querySelector(".label-buttons.with-note");
    controls.replaceWith(labelControls(emit, { withNote: true, onLabelled: () => nextUnlabelled() }));
    box.scrollIntoView({ block: "nearest" });
  }

  function closeReview() {
    state.reviewing = null;
    $("review").hidden = true;
    clear($("review"));
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
    const followN = Object.values(f.kinds).reduce((n, k) => n + k.emits, 0);
    const overall = [
      ["Daily budget", { status: b.status || (b.pass ? "pass" : "fail") }, `≤ ${b.budget} / kind / day`],
      [
        "Follow-rate",
        { status: f.status, n: followN, min_n: f.min_emits },
        `≥ ${pct(f.target)} within ${f.window} tool calls · verdict from ${f.min_emits} emits per kind`,
      ],
      [
        "Precision",
        p.human.overall,
        `≥ ${pct(p.target)} TP (human labels) · verdict from ${p.min_labels} labels`,
      ],
    ];
    for (const [name, fig, target] of overall) {
      summary.append(
        el("div", { class: `summary-card ${statusClass(fig)}`, dataset: { gate: name } },
          el("div", { class: "summary-name", text: name }),
          verdict(fig),
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

    const kinds = [...new Set([...(state.kinds || []), ...Object.keys(b.kinds)])];
    for (const kind of kinds) {
      const bk = b.kinds[kind] || { total: 0, max_per_day: 0, days_over: 0, pass: true };
      const fk = f.kinds[kind] || { emits: 0, followed: 0, rate: null, pass: null, action: "" };
      const hk = p.human.kinds[kind] || { tp: 0, fp: 0, labelled: 0, precision: null, pass: null };
      const ak = p.agent.kinds[kind] || { tp: 0, fp: 0, labelled: 0, precision: null, pass: null };
      const fails = [bk, fk, hk].filter((x) => x.status === "fail" || (!x.status && x.pass === false)).length;
      const card = el(
        "article",
        { class: `card ${fails ? "has-fail" : ""}`, dataset: { kind } },
        el("header", null, el("h3", { text: humanKind(kind) }), el("span", { class: "muted", text: `${bk.total} emit${bk.total === 1 ? "" : "s"}` })),
        gateRow(
          "budget",
          `max ${bk.max_per_day}/day · ${bk.days_over} day(s) over`,
          bk,
          budgetChart(kind, b),
        ),
        gateRow(
          "follow-rate",
          fk.emits ? `${pct(fk.rate)} · ${fk.followed}/${fk.emits} followed — ${fk.action}` : `no emits — ${fk.action}`,
          fk,
          meter(fk.rate, f.target, "follow-rate"),
        ),
        gateRow(
          "precision",
          hk.labelled
            ? `${pct(hk.precision)} · ${hk.tp} TP / ${hk.fp} FP` + (ak.labelled ? ` · agent ${pct(ak.precision)} (${ak.tp}/${ak.fp})` : "")
            : ak.labelled
              ? `no human labels · agent ${pct(ak.precision)} (${ak.tp} TP / ${ak.fp} FP)`
              : "no labels yet — judge emits with TP/FP",
          hk,
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
    const [b, f, p, m] = await Promise.all([
      getJSON(scoped(`/api/anomalies/budget?days=${days}&budget=${budget}`)),
      getJSON(scoped(`/api/anomalies/follow-rate?days=${days}&window=${windowSize}`)),
      getJSON(scoped(`/api/anomalies/precision?days=${days}`)),
      getJSON("/api/mutes").catch(() => null), // an older daemon without the route: no list
    ]);
    renderGates(b, f, p);
    renderMutes(m);
  }

  // Muted kinds (design §2.20): read-only here; `tma1 mute` / `tma1 unmute` change them.
  function renderMutes(m) {
    const box = $("gate-mutes");
    clear(box);
    box.hidden = !m;
    if (!m) return;
    box.append(el("h3", { text: "Muted kinds" }));
    if (!m.mutes.length) {
      box.append(el("p", { class: "pv-empty muted", text: "Nothing muted: every kind can be delivered." }));
      return;
    }
    box.append(
      el("ul", { class: "mute-list" },
        m.mutes.map((x) => el("li", { class: "mute-item", dataset: { kind: x.kind } },
          el("span", { class: "chip muted-badge", text: "muted" }),
          el("span", { class: "pv-kind", text: humanKind(x.kind) }),
          el("span", { class: "muted small", text: muteScope(x.project, x.until) })))),
      el("p", { class: "muted small" }, "Still computed and shown in session previews, never delivered. Undo with ", el("code", { text: "tma1 unmute KIND" }), "."),
    );
  }

  // With the server down, a view says so instead of staying blank (or silently stale).
  function showOffline(tab, err) {
    const box = $(`${tab}-offline`);
    if (!box) return;
    clear(box);
    const what = { anomalies: "anomalies", gates: "gates", sessions: "sessions" }[tab];
    box.append(
      el("p", { class: "help-title", text: `Cannot reach the tma1 server — the ${what} cannot be shown.` }),
      el("p", null, "Start it with ", el("code", { text: "tma1 serve" }), "; this page retries every ", `${Math.round(POLL_MS / 1000)} s.`),
      el("p", { class: "muted small", text: String(err.message || err) }),
    );
    box.hidden = false;
    // Only this message: an empty-state line beside it ("nothing has gone wrong") would
    // claim what a server we cannot reach cannot tell.
    const empty = $(`${tab}-empty`);
    if (empty) empty.hidden = true;
  }

  function hideOffline(tab) {
    const box = $(`${tab}-offline`);
    if (box) box.hidden = true;
  }

  // --- sessions --------------------------------------------------------------------------

  function renderSessions(all) {
    const body = $("sessions-body");
    clear(body);
    const more = all.length > SESSION_PAGE;
    const list = all.slice(0, SESSION_PAGE);
    const search = $("s-search").value.trim();
    const first = state.sessionPage * SESSION_PAGE;
    $("s-prev").disabled = state.sessionPage === 0;
    $("s-next").disabled = !more;
    $("s-page").textContent = list.length ? `${first + 1}–${first + list.length}${more ? " · more" : ""}` : "";
    $("sessions-pager").hidden = state.sessionPage === 0 && !more && !search && list.length === 0;
    for (const s of list) {
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
          el("td", { class: "num", "data-k": "duration", text: fmtDuration(s.duration_ms) }),
          el("td", { class: "num", "data-k": "tool calls", text: s.tool_calls }),
          el("td", { class: `num ${s.failures ? "warn" : ""}`, "data-k": "failures", text: s.failures }),
          el("td", { class: `num ${s.anomalies ? "alert" : ""}`, "data-k": "anomalies", text: s.anomalies }),
        ),
      );
    }
    $("sessions-table").hidden = list.length === 0;
    const empty = $("sessions-empty");
    clear(empty);
    empty.hidden = list.length !== 0;
    if (list.length === 0) {
      if (search || state.sessionPage > 0) {
        empty.append(el("div", { class: "help" }, el("p", { class: "help-title", text: search ? "No sessions match this search." : "No sessions on this page." })));
      } else {
        empty.append(emptyHelp("No sessions yet — no hook event has reached tma1."));
      }
    }
  }

  // Lanes: the main agent, then one per sub-agent (events whose hook data carries an
  // agent_id). Anomalies get their own lane(s) on top.
  function laneKey(it) {
    return it.agent_id ? `sub:${it.agent_id}` : "main";
  }

  function laneName(it) {
    if (!it.agent_id) return "main agent";
    return `sub-agent ${it.agent_type ? `${it.agent_type} ` : ""}${shortId(String(it.agent_id))}`;
  }

  // Markers closer than one marker's width would overlap and hide each other: they are
  // stacked into rows (first row with room), so every marker stays whole and clickable.
  const MARKER_PX = 18;

  function stackRows(positions, widthPx) {
    const minGap = (MARKER_PX + 2) / Math.max(widthPx, 1);
    const rowsEnd = [];
    return positions.map((x) => {
      let r = rowsEnd.findIndex((end) => x - end >= minGap);
      if (r < 0) {
        r = rowsEnd.length;
        rowsEnd.push(x);
      } else rowsEnd[r] = x;
      return r;
    });
  }

  function flashing(id) {
    return state.flash !== null && state.flash.id === id && performance.now() < state.flash.until;
  }

  function timelineStrip(detail, widthPx) {
    const items = detail.timeline;
    const emits = detail.emits;
    const times = [...items.map((i) => i.ts), ...items.map((i) => i.end_ts || i.ts), ...emits.map((e) => e.ts)];
    const start = Math.min(...times);
    const end = Math.max(...times);
    const span = Math.max(end - start, 1);
    const frac = (ts) => ((ts - start) / span) * 0.98 + 0.01;
    const at = (ts) => `${(frac(ts) * 100).toFixed(3)}%`;
    const strip = el("div", { class: "timeline", role: "group", "aria-label": "session timeline" });

    const byTime = [...emits].sort((a, b) => a.ts - b.ts || a.id - b.id);
    const rowOf = stackRows(byTime.map((e) => frac(e.ts)), widthPx);
    const rows = Math.max(1, ...rowOf.map((r) => r + 1));
    const anomalies = el("div", { class: "lane lane-anomalies" }, el("span", { class: "lane-label", text: "anomalies" }));
    const track = el("div", { class: "lane-track" });
    track.style.height = `${rows * MARKER_PX + 4}px`;
    anomalies.append(track);
    byTime.forEach((e, i) => {
      const m = el("button", {
        type: "button",
        class: `tl-marker anomaly sev-${e.severity}`,
        title: `#${e.id} ${humanKind(e.kind)} (${e.severity}) · ${fmtFull(e.ts)}\n${e.evidence}`,
        "aria-label": `anomaly #${e.id}: ${humanKind(e.kind)}`,
        dataset: { id: String(e.id), row: String(rowOf[i]) },
        text: "◆",
        onclick: () => {
          const li = document.querySelector(`li.ev-anomaly[data-id="${CSS.escape(String(e.id))}"]`);
          if (!li) return;
          li.scrollIntoView({ block: "nearest", behavior: "smooth" });
          li.classList.remove("flash");
          void li.offsetWidth; // restart the animation
          li.classList.add("flash");
          // A poll that redraws the list within the flash keeps it lit (see below).
          state.flash = { id: e.id, until: performance.now() + 1200 };
        },
      });
      m.style.left = at(e.ts);
      m.style.bottom = `${rowOf[i] * MARKER_PX + 2}px`;
      track.append(m);
    });
    strip.append(anomalies);

    const lanes = new Map();
    const laneFor = (it) => {
      const key = laneKey(it);
      if (!lanes.has(key)) {
        const lane = el("div", {
          class: `lane lane-tools ${it.agent_id ? "lane-sub" : "lane-main"}`,
          dataset: { lane: key, agent: it.agent_id || "" },
        }, el("span", { class: "lane-label", text: laneName(it), title: it.agent_id ? `${laneName(it)} (agent_id ${it.agent_id})` : "main agent" }), el("div", { class: "lane-track" }));
        lanes.set(key, lane);
      }
      return lanes.get(key).lastChild;
    };
    laneFor({}); // the main agent's lane always comes first
    for (const it of items) {
      const track = laneFor(it);
      if (it.type !== "tool") {
        const m = el("span", { class: "tl-event", title: `${it.event} · ${fmtFull(it.ts)}` });
        m.style.left = at(it.ts);
        track.append(m);
        continue;
      }
      const what = it.command || it.file || "";
      const tick = el("span", {
        class: `tl-tool ${it.failed ? "failed" : ""}`,
        title: `${it.tool_name || "tool"}${what ? `: ${what}` : ""}${it.failed ? ` — failed${it.error ? `: ${it.error}` : ""}` : ""}`,
        dataset: { tool: it.tool_name || "" },
      });
      tick.style.left = at(it.ts);
      track.append(tick);
    }
    for (const lane of lanes.values()) strip.append(lane);
    strip.append(
      el("div", { class: "axis-row" },
        el("span", { text: fmtTime(start) }),
        el("span", { text: `${fmtDuration(end - start)} shown` }),
        el("span", { text: fmtTime(end) })),
    );
    return strip;
  }

  const LIST_MAX = 300;

  function timelineList(detail, showAll) {
    const merged = [
      ...detail.timeline.map((i) => ({ ts: i.ts, order: 0, item: i })),
      ...detail.emits.map((e) => ({ ts: e.ts, order: 1, emit: e })),
    ].sort((a, b) => a.ts - b.ts || a.order - b.order);
    const list = el("ol", { class: "events" });
    const shown = showAll ? merged : merged.slice(-LIST_MAX);
    for (const m of shown) {
      if (m.emit) {
        const e = shared(m.emit);
        list.append(
          el("li", { class: `ev ev-anomaly sev-${e.severity}${flashing(e.id) ? " flash" : ""}`, dataset: { id: String(e.id), label: e.label || "" } },
            el("span", { class: "ev-time", text: fmtTime(e.ts) }),
            el("span", { class: "ev-id", text: `#${e.id}` }),
            el("span", { class: `sev sev-${e.severity}`, text: e.severity }),
            el("strong", { text: humanKind(e.kind) }),
            el("span", { class: "ev-text", text: e.evidence, title: e.evidence }),
            labelControls(e, { withNote: true })),
        );
        continue;
      }
      const it = m.item;
      const lane = it.agent_id ? el("span", { class: "ev-lane", text: laneName(it), title: `agent_id ${it.agent_id}` }) : null;
      const cls = it.agent_id ? " ev-sub" : "";
      if (it.type === "tool") {
        list.append(
          el("li", { class: `ev ev-tool ${it.failed ? "failed" : ""}${cls}`, dataset: { agent: it.agent_id || "" } },
            el("span", { class: "ev-time", text: fmtTime(it.ts) }),
            lane,
            el("span", { class: "tool-name", text: it.tool_name || "tool" }),
            el("code", { class: "ev-text", text: it.command || it.file || "" }),
            it.failed ? el("span", { class: "chip fail", text: it.failure_kind === "masked" ? "failed (masked)" : "failed" }) : null,
            it.failed && it.error ? el("span", { class: "ev-error", text: it.error }) : null),
        );
      } else {
        list.append(
          el("li", { class: `ev ev-other${cls}`, dataset: { agent: it.agent_id || "" } },
            el("span", { class: "ev-time", text: fmtTime(it.ts) }),
            lane,
            el("span", { class: "muted", text: it.event })),
        );
      }
    }
    const frag = el("div", { class: "events-wrap" });
    if (!showAll && merged.length > LIST_MAX) {
      frag.append(
        el("button", {
          type: "button",
          class: "btn show-all",
          text: `show all ${merged.length} events (the ${LIST_MAX} newest are shown)`,
          onclick: () => {
            state.showAllEvents = true;
            renderSessionDetail(detail);
          },
        }),
      );
    }
    frag.append(list);
    return frag;
  }

  // --- what tma1 would say next (GET /api/anomalies/preview) ---------------------------

  const CHANNEL_NAMES = {
    user_prompt_submit: "prompt digest",
    stop_block: "stop block",
    post_tool_use: "tool result",
    session_start: "session bundle",
  };
  const PREVIEW_CLIP = 280;

  function clip(text, limit) {
    const t = String(text || "");
    return t.length > limit ? `${t.slice(0, limit - 1)}…` : t;
  }

  function muteScope(project, until) {
    const where = project ? `in ${project}` : "in every project";
    const till = until === null || until === undefined ? "until `tma1 unmute`" : `until ${fmtFull(until)}`;
    return `${where}, ${till}`;
  }

  function previewStatus(f) {
    if (f.muted) {
      return el("span", {
        class: "chip muted-badge",
        text: "muted",
        title: `computed, never delivered: muted ${muteScope(f.muted_project, f.muted_until)}`,
      });
    }
    if (f.would_deliver) return el("span", { class: "chip would", text: "would deliver" });
    return el("span", { class: "chip na", text: `held: ${humanKind(f.decision || "suppressed")}` });
  }

  function previewItem(f) {
    const held = !f.would_deliver && !f.muted;
    return el("li", { class: `preview-item${f.muted ? " is-muted" : ""}${held ? " is-held" : ""}`, dataset: { kind: f.kind, muted: f.muted ? "1" : "0", held: held ? "1" : "0" } },
      el("div", { class: "pv-head" },
        el("span", { class: `sev sev-${f.severity}`, text: f.severity }),
        el("span", { class: "pv-kind", text: humanKind(f.kind) }),
        el("span", { class: "pv-channel muted", text: `via ${CHANNEL_NAMES[f.channel] || f.channel}` }),
        previewStatus(f)),
      f.muted ? el("div", { class: "pv-mute muted small", text: `Muted ${muteScope(f.muted_project, f.muted_until)}: shown here, never told to the agent.` }) : null,
      el("div", { class: "pv-evidence", text: clip(f.evidence, PREVIEW_CLIP), title: f.evidence }),
      f.suggestion ? el("div", { class: "pv-suggestion muted", text: clip(f.suggestion, PREVIEW_CLIP), title: f.suggestion }) : null);
  }

  function previewPanel(preview) {
    const box = el("section", { class: "preview-panel", id: "preview-panel", "aria-label": "What tma1 would say next" },
      el("div", { class: "pv-title" },
        el("h3", { text: "What tma1 would say next" }),
        el("span", { class: "muted small", text: "a preview: the rules run now, nothing is delivered or logged" })));
    if (!preview) {
      box.append(el("p", { class: "pv-empty muted", text: "Loading the preview…" }));
    } else if (preview.error) {
      box.append(el("p", { class: "pv-empty muted", text: `Preview unavailable (${preview.error}).` }));
    } else if (!preview.findings.length) {
      box.append(el("p", { class: "pv-empty muted", text: "Nothing pending: the next hook would add nothing." }));
    } else {
      // What tma1 would tell (or, muted, would tell but for the mute), apart from what it
      // holds back: a held finding is not something tma1 "would say next".
      const told = preview.findings.filter((f) => f.would_deliver || f.muted);
      const held = preview.findings.filter((f) => !f.would_deliver && !f.muted);
      box.append(told.length
        ? el("ul", { class: "preview-list" }, told.map(previewItem))
        : el("p", { class: "pv-empty muted", text: "Nothing to tell: every pending finding is held back." }));
      if (held.length) {
        box.append(
          el("div", { class: "pv-held-title muted small", text: `Held back — tma1 will not say ${held.length === 1 ? "this" : "these"} now:` }),
          el("ul", { class: "preview-list held-list" }, held.map(previewItem)));
      }
    }
    return box;
  }

  function renderSessionDetail(detail) {
    const box = $("session-detail");
    // A poll must not wipe a note being typed: keep the focused note field's text.
    const focused = document.activeElement;
    const typing = focused && focused.classList && focused.classList.contains("label-note") && box.contains(focused)
      ? { id: focused.closest(".label-buttons").dataset.for, value: focused.value }
      : null;
    if (state.lastDetail && state.lastDetail.session.session_id !== detail.session.session_id) state.showAllEvents = false;
    state.lastDetail = detail;
    clear(box);
    const s = detail.session;
    const subAgents = new Set(detail.timeline.filter((i) => i.agent_id).map((i) => i.agent_id));
    box.append(
      el("div", { class: "detail-head" },
        el("a", { href: state.lastHash.sessionsList || "#sessions", class: "back", text: "← all sessions" }),
        el("h2", { text: s.project || "(unknown project)" }),
        el("code", { class: "muted", text: s.session_id })),
      el("div", { class: "stats" },
        stat("agent", s.agent_source),
        stat("started", fmtFull(s.start_ts)),
        stat("duration", fmtDuration(s.duration_ms)),
        stat("tool calls", s.tool_calls),
        stat("failures", s.failures, s.failures ? "warn" : ""),
        stat("anomalies", s.anomalies, s.anomalies ? "alert" : ""),
        subAgents.size ? stat("sub-agents", subAgents.size) : null),
      previewPanel(state.lastPreview),
    );
    const width = Math.max(box.clientWidth - 40 - 140, 120); // minus padding and lane labels
    box.append(
      timelineStrip(detail, width),
      el("div", { class: "legend muted" },
        el("span", { class: "legend-item" }, el("span", { class: "tl-tool" }), " tool call"),
        el("span", { class: "legend-item" }, el("span", { class: "tl-tool failed" }), " failed"),
        el("span", { class: "legend-item" }, el("span", { class: "tl-marker sev-high", text: "◆" }), " anomaly emitted (click: its entry below; label it there)")),
      timelineList(detail, state.showAllEvents),
    );
    if (typing) {
      const input = box.querySelector(`.label-buttons[data-for="${CSS.escape(typing.id)}"] input.label-note`);
      if (input) {
        input.value = typing.value;
        input.focus();
      }
    }
  }

  function stat(name, value, cls) {
    return el("div", { class: `stat ${cls || ""}` }, el("div", { class: "stat-v", text: value }), el("div", { class: "stat-k", text: name }));
  }

  async function refreshSessions() {
    if (state.sessionId) {
      const sid = state.sessionId;
      const [r, preview] = await Promise.all([
        api(scoped(`/api/sessions/${encodeURIComponent(sid)}`)),
        getJSON(`/api/anomalies/preview?session_id=${encodeURIComponent(sid)}`).catch((err) => ({ error: String(err.message || err) })),
      ]);
      state.lastPreview = preview;
      $("sessions-tools").hidden = true;
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
    state.lastDetail = null;
    $("sessions-tools").hidden = false;
    const q = new URLSearchParams({ limit: String(SESSION_PAGE + 1), offset: String(state.sessionPage * SESSION_PAGE) });
    const search = $("s-search").value.trim();
    if (search) q.set("q", search);
    renderSessions(await getJSON(scoped(`/api/sessions?${q}`)));
  }

  // --- projects the file watcher leaves out (GET /api/health) ------------------------------

  const WATCH_POLL_MS = 30000;
  const UNWATCHED_SHOWN = 20;
  let unwatchedAt = 0;

  async function refreshUnwatched() {
    if (Date.now() - unwatchedAt < WATCH_POLL_MS) return;
    unwatchedAt = Date.now();
    try {
      const files = ((await getJSON("/api/health")).sensors || {}).files || {};
      const entries = Object.entries(files.unwatched || {});
      const list = $("unwatched-list");
      clear(list);
      for (const [project, why] of entries.slice(0, UNWATCHED_SHOWN)) {
        list.append(el("li", null, el("code", { text: project }), ` — ${why.reason}: ${why.detail}`));
      }
      if (entries.length > UNWATCHED_SHOWN) list.append(el("li", { text: `and ${entries.length - UNWATCHED_SHOWN} more (tma1 doctor)` }));
      $("unwatched").hidden = entries.length === 0;
    } catch (_err) {
      // the poll below reports connectivity
    }
  }

  // --- refresh loop ------------------------------------------------------------------------

  async function refresh() {
    if (state.busy) return;
    state.busy = true;
    refreshUnwatched();
    try {
      await loadKinds();
      if (state.tab === "anomalies") await refreshAnomalies();
      else if (state.tab === "gates") await refreshGates();
      else await refreshSessions();
      hideOffline(state.tab);
      setStatus(true, `updated ${new Date().toLocaleTimeString([], TIME_OPTS)}`);
    } catch (err) {
      showOffline(state.tab, err);
      setStatus(false, `cannot reach tma1 (${err.message || err})`);
    } finally {
      state.busy = false;
    }
  }

  // The kind filter's options. Asked once; again on each refresh until it answered (the
  // daemon was down or the page not logged in yet), keeping a kind the URL asks for.
  async function loadKinds() {
    if (state.kinds) return;
    const body = await getJSON("/api/anomalies/kinds");
    state.kinds = body.kinds.map((k) => k.kind);
    const kindSel = $("f-kind");
    for (const k of state.kinds) kindSel.append(el("option", { value: k, text: humanKind(k) }));
    if (state.tab === "anomalies") kindSel.value = parseHash().query.get("kind") || "";
    if (kindSel.value === "" && kindSel.selectedIndex < 0) kindSel.selectedIndex = 0;
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
    for (const id of ["f-severity", "f-kind", "f-channel"]) $(id).addEventListener("change", saveFilters);
    let debounce = null;
    const typed = () => {
      clearTimeout(debounce);
      debounce = setTimeout(saveFilters, 300);
    };
    $("f-session").addEventListener("input", typed);
    $("filters").addEventListener("submit", (ev) => {
      ev.preventDefault();
      saveFilters();
    });
    $("review-next").addEventListener("click", nextUnlabelled);
    $("team-scope").addEventListener("change", () => refresh());
    $("gate-params").addEventListener("change", saveFilters);
    $("gate-params").addEventListener("submit", (ev) => {
      ev.preventDefault();
      saveFilters();
    });
    $("s-search").addEventListener("input", () => {
      state.sessionPage = 0;
      typed();
    });
    $("sessions-tools").addEventListener("submit", (ev) => {
      ev.preventDefault();
      state.sessionPage = 0;
      saveFilters();
    });
    $("s-prev").addEventListener("click", () => {
      state.sessionPage = Math.max(0, state.sessionPage - 1);
      saveFilters();
    });
    $("s-next").addEventListener("click", () => {
      state.sessionPage += 1;
      saveFilters();
    });
    for (const btn of document.querySelectorAll("[role=tab]")) {
      btn.addEventListener("click", () => {
        window.location.hash = state.lastHash[btn.dataset.tab] || `#${btn.dataset.tab}`;
      });
    }
    window.addEventListener("hashchange", route);
    let resizing = null;
    window.addEventListener("resize", () => {
      clearTimeout(resizing);
      resizing = setTimeout(() => {
        if (state.lastDetail && state.tab === "sessions" && state.sessionId) renderSessionDetail(state.lastDetail);
      }, 150);
    });
    document.body.dataset.poll = String(POLL_MS);
    route();
    loadSessionIds();
    state.timer = setInterval(refresh, POLL_MS);
  }

  init();
})();
