// hookproxy's traffic viewer: a live, filterable list of the exchanges the proxy keeps (the server-sent events of
// /api/events: the flows kept, then their changes), and a detail pane for the one selected. Plain JavaScript, no
// build step.
// The list is virtualized: only the rows in view exist in the DOM, so 10,000 flows stay responsive.
"use strict";
(() => {
  const ROW = 22;
  const $ = id => document.getElementById(id);
  const flows = [];          // every flow, in id order (without bodies)
  const byID = new Map();
  let visible = [];          // flows passing the filter
  let matches = () => true;
  let selected = null;
  let renderQueued = false;

  $("version").textContent = document.querySelector('meta[name="hookproxy-version"]').content;

  // ---- formatting ----
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  function time(iso) {
    const d = new Date(iso);
    return isNaN(d) ? "" : `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  }
  function size(n) {
    if (n == null) return "";
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1048576).toFixed(1)} MiB`;
  }
  const ms = v => v == null ? "" : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(2)} s`;
  function parts(url) {
    try { const u = new URL(url); return { host: u.host, path: u.pathname + u.search }; } catch (e) { return { host: "", path: url }; }
  }
  function proto(flow) {
    if (flow.websocket) return "ws";
    return /^HTTP\/2/.test(flow.http_version) ? "h2" : "h1";
  }
  const hooks = flow => [...new Set(flow.events.map(e => e.hook).filter(h => h !== "rule"))].join(" ");
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") node.className = v; else if (k.startsWith("on")) node.addEventListener(k.slice(2), v); else node.setAttribute(k, v);
    }
    return fill(node, children);
  }
  // Appends children to node: arrays flattened, null and undefined left out, other values as text.
  function fill(node, children) {
    for (const child of children.flat(Infinity)) if (child != null) node.append(child instanceof Node ? child : String(child));
    return node;
  }
  function toast(text) {
    const t = $("toast"); t.textContent = text; t.hidden = false;
    clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, 1600);
  }
  async function copy(text, what) {
    try { await navigator.clipboard.writeText(text); }
    catch (e) {
      const area = el("textarea"); area.value = text; document.body.append(area); area.select();
      document.execCommand("copy"); area.remove();
    }
    toast(`${what} copied`);
  }

  // ---- the list ----
  // The position of id in an id-sorted array of flows (where it is, or where it would go).
  function position(array, id) {
    let low = 0, high = array.length;
    while (low < high) { const mid = (low + high) >> 1; if (array[mid].id < id) low = mid + 1; else high = mid; }
    return low;
  }
  // Puts a flow (new or updated) into the list; every step is O(log n) but the rare out-of-order insertion.
  function add(flow) {
    const existing = byID.get(flow.id);
    byID.set(flow.id, flow);
    const at = position(flows, flow.id);
    if (existing) flows[at] = flow; else flows.splice(at, 0, flow);
    const v = position(visible, flow.id);
    const shown = v < visible.length && visible[v].id === flow.id;
    if (matches(flow)) { if (shown) visible[v] = flow; else visible.splice(v, 0, flow); }
    else if (shown) visible.splice(v, 1);
    if (existing && selected && selected.id === flow.id) showDetail(flow.id);
    queueRender();
  }
  function refilter() { visible = flows.filter(matches); queueRender(); }
  function queueRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(render);
  }
  function render() {
    renderQueued = false;
    const viewport = $("viewport");
    const atBottom = viewport.scrollTop + viewport.clientHeight >= viewport.scrollHeight - ROW * 2;
    $("spacer").style.height = `${visible.length * ROW}px`;
    if (atBottom && follow) viewport.scrollTop = viewport.scrollHeight;
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW) - 10);
    const last = Math.min(visible.length, first + Math.ceil(viewport.clientHeight / ROW) + 20);
    const rows = $("rows");
    rows.style.transform = `translateY(${first * ROW}px)`;
    const fragment = document.createDocumentFragment();
    for (let i = first; i < last; i++) fragment.append(row(visible[i]));
    rows.replaceChildren(fragment);
    $("count").textContent = visible.length === flows.length ? `${flows.length}` : `${visible.length} of ${flows.length}`;
    $("empty").hidden = flows.length > 0;
  }
  let follow = true;
  function row(flow) {
    const { host, path } = parts(flow.url);
    const status = flow.state === "pending" ? "…" : flow.status == null ? "ERR" : flow.status;
    const classes = ["row", "flow"];
    if (flow.state === "pending") classes.push("pending");
    if (flow.hop > 0) classes.push("hop");
    if (selected && selected.id === flow.id) classes.push("selected");
    const node = el("div", { class: classes.join(" "), "data-id": flow.id },
      el("span", { class: "c-time" }, time(flow.start)),
      el("span", { class: `c-status ${flow.status == null && flow.state === "done" ? "err" : "s" + String(flow.status || "")[0]}` }, status),
      el("span", { class: "c-method" }, flow.method),
      el("span", { class: "c-host", title: host }, host),
      el("span", { class: "c-path", title: path }, path),
      el("span", { class: "c-proto" }, proto(flow)),
      el("span", { class: "c-size" }, flow.state === "done" ? size(flow.response_body_size) : ""),
      el("span", { class: "c-dur" }, ms(flow.timings && flow.timings.total)),
      el("span", { class: "c-rules", title: flow.rules.join(", ") }, flow.rules.join(", ")),
      el("span", { class: "c-hooks" }, hooks(flow)));
    return node;
  }
  $("rows").addEventListener("click", event => {
    const node = event.target.closest(".row.flow");
    if (node) showDetail(Number(node.dataset.id));
  });
  $("viewport").addEventListener("scroll", () => {
    const v = $("viewport");
    follow = v.scrollTop + v.clientHeight >= v.scrollHeight - ROW * 2;
    queueRender();
  });
  window.addEventListener("resize", queueRender);
  document.addEventListener("keydown", event => {
    if (event.target === $("filter") || !selected || (event.key !== "ArrowDown" && event.key !== "ArrowUp")) return;
    const at = visible.findIndex(f => f.id === selected.id);
    const next = visible[at + (event.key === "ArrowDown" ? 1 : -1)];
    if (next) { event.preventDefault(); showDetail(next.id); }
  });

  let filterTimer;
  $("filter").addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => {
      matches = HookproxyFilter.parse($("filter").value);
      const query = $("filter").value ? `?filter=${encodeURIComponent($("filter").value)}` : "";
      history.replaceState(null, "", location.pathname + query);
      refilter();
    }, 80);
  });
  $("har").addEventListener("click", () => {
    const a = el("a", { href: `/api/har?filter=${encodeURIComponent($("filter").value)}`, download: "hookproxy.har" });
    document.body.append(a); a.click(); a.remove();
  });
  $("clear").addEventListener("click", async () => {
    const response = await fetch("/api/clear", { method: "POST" });
    if (!response.ok) toast(`clear failed: ${response.status}`);
  });
  function clearAll() {
    flows.length = 0; byID.clear(); visible = []; selected = null;
    $("detail").hidden = true; queueRender();
  }

  // ---- the detail pane ----
  function headersTable(headers) {
    if (!headers.length) return el("p", { class: "muted" }, "none");
    return el("table", { class: "headers" }, headers.map(h => el("tr", {}, el("td", {}, h.name), el("td", {}, h.value))));
  }
  function header(headers, name) {
    const found = headers.find(h => h.name.toLowerCase() === name);
    return found ? found.value : "";
  }
  function hex(bytes) {
    const lines = [];
    for (let i = 0; i < bytes.length && i < 65536; i += 16) {
      const chunk = bytes.slice(i, i + 16);
      const hexPart = Array.from(chunk, b => b.toString(16).padStart(2, "0")).join(" ").padEnd(48);
      const text = Array.from(chunk, b => b >= 32 && b < 127 ? String.fromCharCode(b) : ".").join("");
      lines.push(`${i.toString(16).padStart(8, "0")}  ${hexPart} ${text}`);
    }
    if (bytes.length > 65536) lines.push(`… ${bytes.length - 65536} more bytes`);
    return lines.join("\n");
  }
  function body(flow, side) {
    const text = flow[`${side}_body`], encoding = flow[`${side}_body_encoding`];
    const size = flow[`${side}_body_size`];
    const headers = side === "request" ? flow.request_headers : flow.response_headers;
    const type = header(headers, "content-type").toLowerCase();
    if (text == null) return el("p", { class: "muted" }, size ? `${size} bytes, not captured` : "no body");
    const note = flow.truncated[side] ? el("p", { class: "muted" }, `the first ${text.length} characters only (capture limit); ${size} bytes in all`) : null;
    if (type.startsWith("image/") && !header(headers, "content-encoding")) {
      return [el("img", { class: "body", alt: `${side} body`, src: `/api/flows/${flow.id}/${side}/body` }), note];
    }
    if (encoding === "base64") {
      const raw = atob(text);
      const bytes = new Uint8Array(raw.length);
      for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
      return [el("pre", { class: "hex" }, hex(bytes)), note];
    }
    if (/json/.test(type) || /^\s*[{[]/.test(text)) {
      try { return [el("pre", { class: "json" }, JSON.stringify(JSON.parse(text), null, 2)), note]; } catch (e) { /* not JSON after all */ }
    }
    return [el("pre", { class: "text" }, text), note];
  }
  function timings(t) {
    if (!t || t.total == null) return el("p", { class: "muted" }, "no upstream timings (answered by hookproxy, or failed before)");
    const dns = t.dns || 0, connect = t.connect || 0, tls = t.tls || 0;
    const first = t.first_byte != null ? t.first_byte : t.total;
    const wait = Math.max(0, first - dns - connect - tls), receive = Math.max(0, t.total - first);
    const phases = [["dns", dns], ["connect", connect], ["tls", tls], ["wait", wait], ["receive", receive]];
    const total = phases.reduce((a, [, v]) => a + v, 0) || 1;
    return [
      el("div", { class: "timings", title: `total ${ms(t.total)}` },
        phases.map(([name, value]) => { const s = el("span", { class: `t-${name}`, title: `${name} ${ms(value)}` }); s.style.width = `${value / total * 100}%`; return s; })),
      el("div", { class: "legend" }, phases.map(([name, value]) => el("span", {}, el("i", { class: `t-${name}` }), `${name} ${ms(value)}`)), el("span", {}, `total ${ms(t.total)}`)),
    ];
  }
  function trustSnippet(flow, event) {
    const host = parts(flow.url).host.replace(/:\d+$/, "");
    // The pins of the chain the server presented (any one matching accepts), else those the text names.
    const named = ((event.detail || "") + " " + (flow.error || "")).match(/sha256\/\/[A-Za-z0-9+\/=]+/g) || [];
    const pins = [...new Set(event.chain ? event.chain.map(c => c.pin) : named)];
    return [
      "rules:",
      `  - name: trust-${host.replace(/[^A-Za-z0-9.-]/g, "-")}`,
      "    match:",
      `      host: ${host}`,
      "    trust:",
      "      pinning: public_key",
      pins.length ? `      pins: [${pins.map(p => `"${p}"`).join(", ")}]` : `      pins: []  # fill in: hookproxy pin ${host}`,
      "",
    ].join("\n");
  }
  function events(flow) {
    if (!flow.events.length) return el("p", { class: "muted" }, "none");
    return flow.events.map(event => {
      const box = el("div", { class: `event ${event.hook}` }, el("span", { class: "hook" }, event.hook), " ", event.action,
        event.detail ? el("div", { class: "muted" }, event.detail) : null);
      if (event.hook === "trust") {
        if (event.chain) {
          // The chain the server presented, leaf first: each certificate with its issuer, expiry and pin.
          box.append(el("ol", { class: "chain", start: 0 }, event.chain.map(c => el("li", {},
            el("div", {}, c.subject), el("div", { class: "muted" }, `issued by ${c.issuer} · expires ${c.not_after}`),
            el("code", { class: "pin" }, c.pin)))));
        } else {
          const chain = /\(chain: ([^()]*)\)$/.exec(flow.error || "");  // the rejection names the chain presented
          if (chain) box.append(el("div", { class: "chain" }, "chain: ", chain[1].split(" ← ").map((s, i) => el("div", {}, `${i}: ${s}`))));
        }
        const pins = (event.detail.match(/sha256\/\/[A-Za-z0-9+\/=]+/g) || []);
        if (pins.length) box.append(el("div", { class: "chain" }, "pinned: ", pins.join(", ")));
        box.append(el("div", { class: "actions" }, el("button", { onclick: () => copy(trustSnippet(flow, event), "trust: snippet") }, "Copy trust: snippet")));
      }
      return box;
    });
  }
  // The hops of one followed redirect: same client connection, hop numbers in a row.
  function hops(flow) {
    const chain = [flow];
    for (let f = flow; f.hop > 0;) {
      const prev = flows.filter(o => o.client === f.client && o.hop === f.hop - 1 && o.id < f.id).pop();
      if (!prev) break; chain.unshift(prev); f = prev;
    }
    for (let f = flow; ;) {
      const next = flows.find(o => o.client === f.client && o.hop === f.hop + 1 && o.id > f.id);
      if (!next) break; chain.push(next); f = next;
    }
    if (chain.length < 2) return null;
    return el("ol", { class: "hops", start: 0 }, chain.map(f => el("li", { class: f.id === flow.id ? "current" : "" },
      el("a", { onclick: () => showDetail(f.id) }, `${f.status ?? "…"} ${f.method} ${f.url}`))));
  }
  function websocket(flow) {
    if (!flow.websocket) return null;
    const messages = flow.websocket.messages || [];
    const ws = flow.websocket;
    const close = ws.close ? `closed ${ws.close.code ?? "without a close frame"} by ${ws.close.by}${ws.close.reason ? ": " + ws.close.reason : ""}`
      : "open";
    return [el("h3", {}, `${ws.protocol === "websocket" ? "WebSocket" : ws.protocol} messages: ↑${ws.sent} ↓${ws.received} (${close})`),
      el("pre", {}, messages.map(m => `${m.direction === "send" ? "↑" : "↓"} ${m.opcode === 2 ? "binary (base64)" : "text"} ${m.data}${m.truncated ? " …" : ""}`).join("\n") || "none")];
  }
  function curl(flow) {
    const quote = s => `'${String(s).replace(/'/g, `'\\''`)}'`;
    const args = ["curl", "-X", flow.method, quote(flow.url)];
    for (const h of flow.request_headers) {
      if (["host", "content-length"].includes(h.name.toLowerCase())) continue;
      args.push("-H", quote(`${h.name}: ${h.value}`));
    }
    if (flow.request_body != null) {
      args.push(flow.request_body_encoding === "base64" ? "--data-binary @body.bin" : `--data-binary ${quote(flow.request_body)}`);
    }
    return args.join(" ");
  }
  async function showDetail(id) {
    const summary = byID.get(id);
    if (!summary) return;
    selected = summary;
    queueRender();
    const response = await fetch(`/api/flows/${id}`);
    if (!response.ok || !selected || selected.id !== id) return;
    const flow = await response.json();
    const pane = $("detail");
    const hopList = hops(summary);
    pane.replaceChildren();
    fill(pane, [
      el("h2", {}, `${flow.status ?? (flow.state === "pending" ? "pending" : "error")} ${flow.method} ${flow.url}`),
      flow.upstream_url && flow.upstream_url !== flow.url ? el("p", {}, "fetched from ", el("code", {}, flow.upstream_url)) : null,
      flow.error ? el("p", { class: "err" }, flow.error) : null,
      el("p", { class: "muted" }, `#${flow.id} · ${flow.http_version} · ${flow.client} · ${flow.start}${flow.rules.length ? " · rules: " + flow.rules.join(", ") : ""}`),
      el("div", { class: "actions" }, el("button", { id: "copy-curl", onclick: () => copy(curl(flow), "curl command") }, "Copy as curl")),
      el("h3", {}, "Timings"), timings(flow.timings),
      el("h3", {}, "Hook events"), events(flow),
      hopList ? [el("h3", {}, "Redirect hops"), hopList] : null,
      websocket(flow),
      el("h3", {}, "Request headers"), headersTable(flow.request_headers),
      el("h3", {}, "Request body"), body(flow, "request"),
      el("h3", {}, "Response headers"), headersTable(flow.response_headers),
      el("h3", {}, "Response body"), body(flow, "response")]);
    pane.hidden = false;
  }

  // ---- loading and live updates ----
  // The stream starts with the flows kept (then `ready`), and goes on with their changes: each state of a flow
  // comes once, in order, so nothing falls between a list read on its own and the stream (nor comes twice).
  function connect() {
    const source = new EventSource("/api/events");
    source.addEventListener("open", () => { $("live").className = "live on"; clearAll(); });
    source.addEventListener("flow", event => add(JSON.parse(event.data)));
    source.addEventListener("clear", clearAll);
    source.addEventListener("reset", clearAll);  // a new snapshot follows
    source.addEventListener("error", () => { $("live").className = "live off"; });
  }

  const initial = new URLSearchParams(location.search).get("filter");
  if (initial) { $("filter").value = initial; matches = HookproxyFilter.parse(initial); }
  connect();
})();
