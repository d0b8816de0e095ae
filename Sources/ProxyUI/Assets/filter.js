// The viewer's filter language (the same rules as FlowFilter.swift, which /api/har?filter= applies):
// words separated by spaces, all of which must hold; a leading "-" negates one.
//   host:TEXT  method:GET (or a bare GET/POST/…)  status:4xx, status:404 (or bare 4xx, 404)  rule:NAME
//   hook:trust|redirect|challenge (any hook)  error  — anything else: text the URL (or the error) contains.
"use strict";
const HookproxyFilter = (() => {
  const METHODS = new Set(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE"]);

  function statusRange(text) {
    if (!/^[1-5](\d\d|xx)$/.test(text)) return null;
    const first = Number(text[0]);
    return text.endsWith("xx") ? [first * 100, first * 100 + 99] : [Number(text), Number(text)];
  }

  function term(word) {
    const lower = word.toLowerCase();
    const colon = lower.indexOf(":");
    if (colon >= 0) {
      const key = lower.slice(0, colon), value = lower.slice(colon + 1);
      if (value) {
        if (key === "host") return { kind: "host", value };
        if (key === "method") return { kind: "method", value: value.toUpperCase() };
        if (key === "rule") return { kind: "rule", value };
        if (key === "hook") return { kind: "hook", value };
        if (key === "status") { const range = statusRange(value); if (range) return { kind: "status", range }; }
      }
    }
    if (lower === "error") return { kind: "error" };
    const range = statusRange(lower);
    if (range) return { kind: "status", range };
    if (METHODS.has(word)) return { kind: "method", value: word };
    return { kind: "text", value: lower };
  }

  function hostOf(url) {
    try { return new URL(url).hostname; } catch (e) { return ""; }
  }

  function holds(t, flow) {
    switch (t.kind) {
      case "text": return flow.url.toLowerCase().includes(t.value) || (flow.error || "").toLowerCase().includes(t.value);
      case "host": return hostOf(flow.url).toLowerCase().includes(t.value);
      case "method": return flow.method.toUpperCase() === t.value;
      case "status": return flow.status != null && flow.status >= t.range[0] && flow.status <= t.range[1];
      case "rule": return flow.rules.some(r => r.toLowerCase() === t.value);
      case "hook": return flow.events.some(e => e.hook === t.value);
      case "error": return flow.error != null;
    }
    return false;
  }

  function parse(text) {
    const terms = [];
    for (let word of text.split(/\s+/)) {
      if (!word) continue;
      let negated = false;
      if (word.startsWith("-") && word.length > 1) { negated = true; word = word.slice(1); }
      terms.push({ t: term(word), negated });
    }
    return flow => terms.every(({ t, negated }) => holds(t, flow) !== negated);
  }

  return { parse };
})();
