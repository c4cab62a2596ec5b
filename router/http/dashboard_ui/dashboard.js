// pinch-router's dashboard: reads /ui/api/ (the decision log, summed and priced by the proxy) and
// draws it. Plain ES module, no build step; charts by the vendored uPlot (window.uPlot).
// Every text from the server goes into the page as text (textContent), never as markup.

const KEY_STORE = "pinch-router-key"; // sessionStorage: this tab's session only, never a URL
const REFRESH_MS = 5000;
const uPlot = window.uPlot;

const state = {
  window: sessionStorage.getItem("pinch-router-window") || "day",
  live: true,
  viewer: null,
  loading: false,
  again: false,
  sessionSort: { key: "last_seen", desc: true },
  filters: { wire: "", model: "", client: "" },
};

class NeedKey extends Error {}
class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// ---- talking to the proxy ------------------------------------------------------------------------

async function api(path, params = {}) {
  const url = new URL("api/" + path, document.baseURI);
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  const headers = {};
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) headers.Authorization = "Bearer " + key;
  const response = await fetch(url, { headers, cache: "no-store", credentials: "omit" });
  if (response.status === 401) throw new NeedKey("the key was refused");
  const body = await response.json();
  if (!response.ok) throw new ApiError((body.error && body.error.message) || response.statusText, response.status);
  return body;
}

// ---- formatting ------------------------------------------------------------------------------------

const intFormat = new Intl.NumberFormat("en-US");
const fmtInt = (n) => (n === null || n === undefined ? "–" : intFormat.format(Math.round(n)));
function fmtUsd(v) {
  if (v === null || v === undefined) return "–";
  const sign = v < 0 ? "-" : "";
  const a = Math.abs(v);
  if (a === 0) return "$0.00";
  if (a < 0.01) return sign + "$" + a.toPrecision(2);
  return sign + "$" + a.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}
// a table cell's dollars: a request's cents need more digits than a window's total
const fmtUsdFine = (v) => (v === null || v === undefined ? "–" : Math.abs(v) >= 1 || v === 0 ? fmtUsd(v) : (v < 0 ? "-$" : "$") + Math.abs(v).toFixed(4));
function fmtCompact(n) {
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(1).replace(/\.0$/, "") + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(0) + "k";
  return fmtInt(n);
}
const fmtPct = (f) => (f === null || f === undefined ? "–" : (100 * f).toFixed(1) + "%");
const fmtMs = (ms) => (ms === null || ms === undefined ? "–" : ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : ms.toFixed(1) + " ms");
function fmtTime(ts) {
  if (ts === null || ts === undefined) return "–";
  const d = new Date(ts * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
// a table cell's time: today's as its time of day, an older one with its month and day (fmtTime is whole)
function fmtWhen(ts) {
  if (ts === null || ts === undefined) return "–";
  const d = new Date(ts * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return d.toDateString() === new Date().toDateString() ? time : `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}
const shortKey = (key) => (key ? key.slice(0, 8) : "–");

// ---- building the page (text only) -----------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function card(id, label, value, note, kind) {
  return el("div", { class: "card" + (kind ? " " + kind : ""), id: "card-" + id }, el("div", { class: "label", text: label }), el("div", { class: "value", text: value }), note ? el("div", { class: "note", text: note }) : null);
}

function savingKind(v) {
  if (v === null || v === undefined || v === 0) return null;
  return v > 0 ? "saving" : "loss";
}

// A table: columns [{key, label, num, format, sort}], rows of objects; optional row link and sort state.
function table(id, columns, rows, { onRow, sort, onSort, rowClass } = {}) {
  const head = el(
    "tr",
    {},
    columns.map((c) => {
      const classes = [c.num ? "num" : "", onSort ? "sortable" : "", sort && sort.key === c.key ? (sort.desc ? "sorted-desc" : "sorted-asc") : ""].filter(Boolean).join(" ");
      return el("th", { class: classes || null, dataset: { key: c.key }, onclick: onSort ? () => onSort(c.key) : null, text: c.label });
    }),
  );
  const body = rows.map((row) =>
    el(
      "tr",
      { class: [onRow ? "link" : "", rowClass ? rowClass(row) : ""].filter(Boolean).join(" ") || null, onclick: onRow ? () => onRow(row) : null },
      columns.map((c) => el("td", { class: [c.num ? "num" : "", c.wrap ? "wrap" : ""].filter(Boolean).join(" ") || null, text: c.format ? c.format(row[c.key], row) : row[c.key] ?? "–" })),
    ),
  );
  return el("div", { class: "scroll" }, el("table", { id }, el("thead", {}, head), el("tbody", {}, body)));
}

function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [el("dt", { text: k }), el("dd", {}, v instanceof Node ? v : String(v ?? "–"))]));
}

// ---- charts ----------------------------------------------------------------------------------------

const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00"];

function chart(title, xs, series, { time = true, money = false, bars = false, xLabel } = {}) {
  const box = el("div", { class: "chart" }, el("h3", { text: title }));
  const width = Math.max(380, Math.min(640, (document.getElementById("page").clientWidth || 900) / 2 - 30));
  const draw = bars ? uPlot.paths.bars({ size: [0.7, 48], align: 0 }) : undefined;
  // bars are centred on their bucket: half a bucket of room on either side, the last one included
  const step = xs.length > 1 ? xs[1] - xs[0] : 1;
  const opts = {
    width,
    height: 200,
    scales: { x: bars ? { time, range: (u, min, max) => [min - step / 2, max + step / 2] } : { time } },
    series: [
      { label: xLabel || (time ? "time" : "turn") },
      ...series.map((s, i) => ({
        label: s.label,
        stroke: COLORS[i % COLORS.length],
        fill: bars ? COLORS[i % COLORS.length] + "99" : undefined,
        width: bars ? 0 : 1.5,
        paths: draw,
        points: { show: !time && !bars },
        value: (u, v) => (v === null || v === undefined ? "–" : money ? fmtUsdFine(v) : fmtInt(v)),
      })),
    ],
    axes: [{}, { size: 64, values: (u, vals) => vals.map((v) => (money ? fmtUsd(v) : fmtCompact(v))) }],
    legend: { show: true },
  };
  new uPlot(opts, [xs, ...series.map((s) => s.values)], box);
  return box;
}

const cumulative = (values) => {
  let total = 0;
  return values.map((v) => (total += v));
};

// ---- pages -----------------------------------------------------------------------------------------

async function overviewPage() {
  const o = await api("overview", { window: state.window });
  const page = [];
  const refNote = o.reference_model ? "against " + o.reference_model + " where the client asked for no priced model" : "against the model each client asked for, where priced";
  page.push(
    el("h2", { text: "Overview — " + windowName(o.window) }),
    el(
      "div",
      { class: "cards" },
      card("requests", "Requests", fmtInt(o.requests), `${fmtInt(o.errors)} errors · ${fmtInt(o.fallbacks)} fallbacks`),
      card("tokens-in", "Tokens in", fmtInt(o.tokens_in), "prompt tokens the providers reported"),
      card("tokens-out", "Tokens out", fmtInt(o.tokens_out)),
      card("cache-share", "Prompt-cache share", fmtPct(o.cache_share), o.cache_share === null ? "no provider reported cache figures" : `${fmtInt(o.cached_tokens)} tokens from the cache`),
      card("spent", "Dollars spent", fmtUsd(o.spent), o.unpriced_requests ? `${fmtInt(o.unpriced_requests)} answers without usage` : "at the models' cost_per_mtok"),
      card("saved-pinch", "Saved by pinch", fmtUsd(o.saved_by_pinch), `${fmtInt(o.pinch_tokens_saved)} tokens pinched · against the same requests unpinched`, savingKind(o.saved_by_pinch)),
      card("saved-routing", "Saved by routing", o.saved_by_routing === null ? "–" : fmtUsd(o.saved_by_routing), o.saved_by_routing === null ? "no reference priced (dashboard.reference_model)" : refNote, savingKind(o.saved_by_routing)),
      card("errors", "Errors", fmtInt(o.errors), `${fmtInt(o.client_closed)} clients left early`, o.errors ? "loss" : null),
    ),
  );
  const t = o.timeline;
  page.push(
    el(
      "div",
      { class: "charts" },
      chart(
        "Requests",
        t.t,
        [
          { label: "requests", values: t.requests },
          { label: "errors", values: t.errors },
        ],
        { bars: true },
      ),
      chart(
        "Dollars over the window (cumulative)",
        t.t,
        [
          { label: "spent", values: cumulative(t.spent) },
          { label: "unpinched", values: cumulative(t.unpinched) },
          { label: "without routing", values: cumulative(t.reference) },
        ],
        { money: true },
      ),
      chart(
        "Prompt tokens",
        t.t,
        [
          { label: "in", values: t.tokens_in },
          { label: "from the cache", values: t.cached_tokens },
        ],
        { bars: true },
      ),
      chart("Answer tokens", t.t, [{ label: "out", values: t.tokens_out }], { bars: true }),
    ),
  );
  page.push(
    el(
      "div",
      { class: "tables" },
      el(
        "div",
        {},
        el("h2", { text: "Model mix" }),
        table(
          "models",
          [
            { key: "model", label: "model" },
            { key: "requests", label: "requests", num: true, format: fmtInt },
            { key: "tokens_in", label: "tokens in", num: true, format: fmtInt },
            { key: "tokens_out", label: "tokens out", num: true, format: fmtInt },
            { key: "spent", label: "spent", num: true, format: fmtUsdFine },
            { key: "saved_by_pinch", label: "pinch saved", num: true, format: fmtUsdFine },
            { key: "saved_by_routing", label: "routing saved", num: true, format: fmtUsdFine },
          ],
          o.models,
        ),
      ),
      el(
        "div",
        {},
        el("h2", { text: "Classification sources" }),
        table(
          "sources",
          [
            { key: "source", label: "source" },
            { key: "count", label: "requests", num: true, format: fmtInt },
          ],
          Object.entries(o.sources).map(([source, count]) => ({ source, count })),
        ),
      ),
      el(
        "div",
        {},
        el("h2", { text: "Errors" }),
        Object.keys(o.error_codes).length
          ? table(
              "error-codes",
              [
                { key: "code", label: "code" },
                { key: "count", label: "requests", num: true, format: fmtInt },
              ],
              Object.entries(o.error_codes).map(([code, count]) => ({ code, count })),
            )
          : el("p", { class: "muted", text: "none in this window" }),
      ),
    ),
  );
  return page;
}

function windowName(name) {
  return { hour: "last hour", day: "last day", week: "last week" }[name] || name;
}

async function sessionsPage() {
  const answer = await api("sessions", { window: state.window });
  const wires = answer.wires;
  const all = answer.data.map((s) => ({ ...s, agent: wires[s.wire] || s.wire || "–", model_list: s.models.join(", ") }));
  const options = (values) => [...new Set(values.filter(Boolean))].sort();
  const select = (name, label, values) =>
    el(
      "label",
      {},
      label + " ",
      el(
        "select",
        {
          id: "filter-" + name,
          onchange: (event) => {
            state.filters[name] = event.target.value;
            render();
          },
        },
        el("option", { value: "", text: "all" }),
        options(values).map((v) => el("option", { value: v, text: name === "wire" ? wires[v] || v : v, selected: state.filters[name] === v ? "selected" : null })),
      ),
    );
  const f = state.filters;
  const shown = all.filter((s) => (!f.wire || s.wire === f.wire) && (!f.model || s.models.includes(f.model)) && (!f.client || s.client === f.client));
  const sort = state.sessionSort;
  shown.sort((a, b) => {
    const x = a[sort.key] ?? -Infinity;
    const y = b[sort.key] ?? -Infinity;
    const order = x < y ? -1 : x > y ? 1 : 0;
    return sort.desc ? -order : order;
  });
  const showClient = state.viewer && state.viewer.sees === "everyone" && state.viewer.keys;
  const columns = [
    { key: "session", label: "session", format: shortKey },
    { key: "agent", label: "agent (API)", wrap: true },
    showClient ? { key: "client", label: "key" } : null,
    { key: "first_seen", label: "first seen", format: fmtWhen },
    { key: "last_seen", label: "last seen", format: fmtWhen },
    { key: "requests", label: "requests", num: true, format: fmtInt },
    { key: "model_list", label: "models" },
    { key: "tokens_in", label: "tokens in", num: true, format: fmtInt },
    { key: "tokens_out", label: "tokens out", num: true, format: fmtInt },
    { key: "spent", label: "spent", num: true, format: fmtUsdFine },
    { key: "saved_by_pinch", label: "pinch saved", num: true, format: fmtUsdFine },
    { key: "saved_by_routing", label: "routing saved", num: true, format: fmtUsdFine },
    { key: "errors", label: "errors", num: true, format: fmtInt },
  ].filter(Boolean);
  return [
    el("h2", { text: `Sessions — ${windowName(answer.window)} (${shown.length} of ${all.length})` }),
    el(
      "div",
      { class: "filters" },
      select("wire", "agent", all.map((s) => s.wire)),
      select("model", "model", all.flatMap((s) => s.models)),
      showClient ? select("client", "key", all.map((s) => s.client)) : null,
    ),
    shown.length
      ? table("sessions", columns, shown, {
          sort,
          onSort: (key) => {
            state.sessionSort = { key, desc: sort.key === key ? !sort.desc : true };
            render();
          },
          onRow: (row) => (location.hash = "#/session/" + encodeURIComponent(row.session)),
        })
      : el("p", { class: "muted", text: "No sessions in this window." }),
  ];
}

async function sessionPage(key) {
  const answer = await api("session", { key });
  const turns = answer.data;
  const n = turns.map((_, i) => i + 1);
  const last = turns[turns.length - 1];
  const total = (name) => turns.reduce((sum, t) => sum + (t[name] || 0), 0);
  const models = [...new Set(turns.map((t) => t.model).filter(Boolean))];
  return [
    el("h2", { text: "Session " + shortKey(key) }),
    facts([
      ["session key", el("span", { class: "mono", text: key })],
      ["agent (API)", answer.wires[answer.wire] || answer.wire || "–"],
      ["key", answer.client || "–"],
      ["first / last request", fmtTime(turns[0].ts) + " / " + fmtTime(last.ts)],
      ["requests", fmtInt(turns.length)],
      ["models", models.join(", ") || "–"],
      ["tokens in / out", fmtInt(total("prompt_tokens")) + " / " + fmtInt(total("completion_tokens"))],
      ["spent", fmtUsd(last.spent_so_far)],
      ["unpinched", fmtUsd(last.unpinched_so_far)],
      ["saved by pinch", fmtUsd(last.unpinched_so_far - last.spent_so_far)],
    ]),
    el(
      "div",
      { class: "charts" },
      chart(
        "Cumulative cost, with and without pinch",
        n,
        [
          { label: "with pinch", values: turns.map((t) => t.spent_so_far) },
          { label: "without pinch", values: turns.map((t) => t.unpinched_so_far) },
        ],
        { time: false, money: true },
      ),
      chart(
        "Tokens per turn",
        n,
        [
          { label: "original", values: turns.map((t) => t.tokens_before) },
          { label: "sent", values: turns.map((t) => t.prompt_tokens) },
          { label: "cached", values: turns.map((t) => t.cached_tokens) },
        ],
        { time: false },
      ),
    ),
    el("h2", { text: "Turns" }),
    table(
      "turns",
      [
        { key: "n", label: "#", num: true },
        { key: "ts", label: "time", format: fmtWhen },
        { key: "model", label: "model" },
        { key: "routed_tier", label: "tier", num: true },
        { key: "source", label: "source" },
        { key: "tokens_before", label: "original", num: true, format: fmtInt },
        { key: "tokens_after", label: "after pinch", num: true, format: fmtInt },
        { key: "prompt_tokens", label: "sent", num: true, format: fmtInt },
        { key: "cached_share", label: "cached", num: true, format: fmtPct },
        { key: "pinch", label: "pinch new / restored" },
        { key: "duration_ms", label: "latency", num: true, format: fmtMs },
        { key: "status", label: "status", num: true },
        { key: "cost", label: "cost", num: true, format: fmtUsdFine },
        { key: "unpinched", label: "unpinched", num: true, format: fmtUsdFine },
      ],
      turns.map((t, i) => ({
        ...t,
        n: i + 1,
        cached_share: t.cached_tokens !== null && t.prompt_tokens ? t.cached_tokens / t.prompt_tokens : null,
        pinch: t.pinch_newly_compressed === null ? "–" : `${t.pinch_newly_compressed} / ${t.pinch_restored ?? 0}`,
      })),
      { onRow: (row) => (location.hash = "#/decision/" + encodeURIComponent(row.request_id)), rowClass: (row) => (row.status >= 400 ? "failed" : "") },
    ),
  ];
}

async function decisionPage(id) {
  const d = await api("decision", { id });
  const stages = d.stages || [];
  return [
    el("h2", { text: "Request " + d.request_id }),
    facts([
      ["time", fmtTime(d.ts)],
      ["status", d.status + (d.error_code ? " " + d.error_code : "")],
      ["session", d.session ? el("a", { href: "#/session/" + encodeURIComponent(d.session), class: "mono", text: d.session }) : "–"],
      ["session source", d.session_source],
      ["key", d.client],
      ["requested model", d.requested_model ?? "(none: routed)"],
      ["class", [d.category, d.tier, d.source].filter((v) => v !== null && v !== undefined).join(", ") + (d.classifier_reason ? " (" + d.classifier_reason + ")" : "")],
      ["routed tier", d.routed_tier + (d.escalation ? " — " + d.escalation : "")],
      ["model", d.model ? d.model + " via " + d.provider : "none answered"],
      ["wire", d.wire_in ? d.wire_in + " → " + (d.wire_out || "-") + (d.wire_dropped ? ", dropped " + d.wire_dropped : "") : "–"],
      ["candidates", (d.candidates || []).join(" → ") || "–"],
      ["rejected", (d.rejected || []).map((r) => r.model + ": " + r.reasons.join(", ")).join("; ") || "–"],
      ["attempts", (d.attempts || []).map((a, i) => `${i + 1}. ${a.model} (${a.provider}) → ${a.status ?? "no answer"}${a.error ? " " + a.error : ""}`).join("; ") || "–"],
      ["pinch", d.pinch_mode ? `${d.pinch_mode}: ${fmtInt(d.tokens_before)} → ${fmtInt(d.tokens_after)} tokens, ${d.pinch_compressed} compressed (${d.pinch_reapplied} reapplied, ${d.pinch_newly_compressed} new, ${d.pinch_restored} restored)` : "–"],
      ["pinch reason", d.pinch_reason || "–"],
      ["first sight", d.pinch_first_sight_new === null ? "–" : `${d.pinch_first_sight_new} new, ${d.pinch_first_sight_reapplied} from the ledger, ${fmtInt(d.pinch_first_sight_saved)} tokens saved`],
      ["relevance", d.relevance_status ? d.relevance_status + (d.relevance_reason ? " (" + d.relevance_reason + ")" : "") : "–"],
      ["time taken", `first byte ${fmtMs(d.first_byte_ms)}, upstream ${fmtMs(d.upstream_ms)}, total ${fmtMs(d.duration_ms)}, ${fmtMs(d.overhead_ms)} in the proxy`],
      ["usage", `${fmtInt(d.prompt_tokens)} prompt (${fmtInt(d.cached_tokens)} cached, ${fmtInt(d.cache_write_tokens)} written) + ${fmtInt(d.completion_tokens)} completion`],
      ["dollars", `${fmtUsdFine(d.cost)} spent · ${fmtUsdFine(d.unpinched)} unpinched` + (d.reference === null ? "" : ` · ${fmtUsdFine(d.reference)} on ${d.reference_model}`)],
      ["outcome", d.outcome ? d.outcome + (d.outcome_reason ? " (" + d.outcome_reason + ")" : "") : "–"],
      ["stream error", d.stream_error || "–"],
    ]),
    el("h2", { text: "Stage trace" }),
    table(
      "trace",
      [
        { key: "stage", label: "stage" },
        { key: "outcome", label: "outcome" },
        { key: "ms", label: "ms", num: true, format: (v) => (v === null || v === undefined ? "–" : v.toFixed(2)) },
        { key: "detail", label: "detail", wrap: true },
      ],
      stages,
    ),
  ];
}

async function healthPage() {
  const h = await api("health");
  const badge = (up, text) => el("span", { class: "badge " + (up ? "up" : "down"), text });
  return [
    el("h2", { text: "Health" }),
    facts([
      ["proxy", badge(h.status === "ok", h.status)],
      ["problems", h.problems.join("; ") || "none"],
      ["session state", h.state_backend],
      ["chain", h.chain.join(" → ")],
      ["classifier", h.classifier.in_chain ? `${h.classifier.model} on ${h.classifier.provider}` : "not in the chain"],
      ["embedder (relevance)", h.relevance.enabled ? `${h.relevance.model} (${h.relevance.api})` : "off"],
      ["decision log", h.decision_log ? `${fmtInt(h.decision_log.written)} written, ${fmtInt(h.decision_log.dropped)} dropped, ${fmtInt(h.decision_log.lost)} lost` : "disabled"],
    ]),
    el("h2", { text: "Providers" }),
    table(
      "providers",
      [
        { key: "name", label: "provider" },
        { key: "api", label: "api" },
        { key: "down", label: "state", format: (down, row) => (down ? `down (retried in ${row.retry_in_seconds} s)` : "up") },
      ],
      h.providers,
    ),
    el("h2", { text: "Models and prices ($ per million tokens)" }),
    table(
      "prices",
      [
        { key: "name", label: "model" },
        { key: "provider", label: "provider" },
        { key: "tiers", label: "tiers", format: (v) => v.join(", ") },
        { key: "context_window", label: "window", num: true, format: fmtInt },
        { key: "input", label: "input", num: true },
        { key: "output", label: "output", num: true },
        { key: "cache_read", label: "cache read", num: true, format: (v) => v ?? "= input" },
        { key: "cache_write", label: "cache write", num: true, format: (v) => v ?? "= input" },
      ],
      h.models.map((m) => ({ ...m, ...m.cost_per_mtok })),
    ),
  ];
}

// ---- routing, keys, live refresh --------------------------------------------------------------------

function route() {
  const [, page = "overview", arg] = location.hash.match(/^#\/([a-z]+)(?:\/(.*))?$/) || [];
  return { page, arg: arg === undefined ? undefined : decodeURIComponent(arg) };
}

async function render() {
  if (state.loading) {
    state.again = true; // a navigation (or a refresh) during a load: render once more when it ends
    return;
  }
  state.loading = true;
  state.again = false;
  const { page, arg } = route();
  for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("current", link.dataset.page === page);
  const status = document.getElementById("status");
  try {
    const content =
      page === "sessions" ? await sessionsPage() : page === "session" ? await sessionPage(arg) : page === "decision" ? await decisionPage(arg) : page === "health" ? await healthPage() : await overviewPage();
    const target = document.getElementById("page");
    target.replaceChildren(...content);
    target.dataset.loaded = page;
    status.textContent = "updated " + fmtTime(Date.now() / 1000);
  } catch (error) {
    if (error instanceof NeedKey) {
      askForKey(sessionStorage.getItem(KEY_STORE) ? "The key was refused." : "");
    } else {
      document.getElementById("page").replaceChildren(el("p", { class: "error", id: "page-error", text: error.message }));
    }
  } finally {
    state.loading = false;
  }
  if (state.again) await render();
}

function askForKey(message) {
  sessionStorage.removeItem(KEY_STORE);
  document.getElementById("key-form").hidden = false;
  document.getElementById("page").replaceChildren();
  document.getElementById("key-error").textContent = message;
  document.getElementById("forget").hidden = true;
  document.getElementById("viewer").textContent = "";
  document.getElementById("key-input").focus();
}

async function start() {
  try {
    state.viewer = await api("viewer");
  } catch (error) {
    if (error instanceof NeedKey) return askForKey(sessionStorage.getItem(KEY_STORE) ? "The key was refused." : "");
    document.getElementById("page").replaceChildren(el("p", { class: "error", id: "page-error", text: error.message }));
    return;
  }
  document.getElementById("key-form").hidden = true;
  const v = state.viewer;
  document.getElementById("viewer").textContent = v.name ? `${v.name} (${v.role}: ${v.sees === "everyone" ? "everyone's requests" : "own requests"})` : "";
  document.getElementById("forget").hidden = !v.keys;
  await render();
}

async function init() {
  const windowSelect = document.getElementById("window");
  windowSelect.value = state.window;
  windowSelect.addEventListener("change", () => {
    state.window = windowSelect.value;
    sessionStorage.setItem("pinch-router-window", state.window);
    render();
  });
  const live = document.getElementById("live");
  live.addEventListener("change", () => (state.live = live.checked));
  document.getElementById("key").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("key-input");
    if (!input.value) return;
    sessionStorage.setItem(KEY_STORE, input.value);
    input.value = "";
    start();
  });
  document.getElementById("forget").addEventListener("click", () => askForKey(""));
  window.addEventListener("hashchange", render);
  setInterval(() => {
    const { page } = route();
    if (state.live && state.viewer && document.visibilityState === "visible" && page !== "decision" && page !== "health") render();
  }, REFRESH_MS);
  // The access check needs no key: without a stored key, ask for one only where the proxy takes keys.
  if (!sessionStorage.getItem(KEY_STORE)) {
    const access = await (await fetch(new URL("api/access", document.baseURI), { cache: "no-store", credentials: "omit" })).json();
    if (access.keys) return askForKey("");
  }
  await start();
}

init();
