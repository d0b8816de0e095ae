/// The HAR 1.2 JSON schema the tests (log unit tests and integration tests) validate against, written from the HAR 1.2 spec
/// (http://www.softwareishard.com/blog/har-12-spec/): required fields per object, their types, -1 allowed only for
/// the optional timings, and no unknown fields except `comment` and custom ones starting with `_`.
public enum HARSchema {
    public static let json = #"""
    {
      "$schema": "http://json-schema.org/draft-07/schema#",
      "title": "HAR 1.2",
      "type": "object",
      "required": ["log"],
      "additionalProperties": false,
      "properties": { "log": { "$ref": "#/definitions/log" } },
      "definitions": {
        "custom": { "patternProperties": { "^_": {} } },
        "nameValue": {
          "type": "object", "required": ["name", "value"], "additionalProperties": false,
          "patternProperties": { "^_": {} },
          "properties": { "name": { "type": "string" }, "value": { "type": "string" }, "comment": { "type": "string" } }
        },
        "log": {
          "type": "object", "required": ["version", "creator", "entries"], "additionalProperties": false,
          "patternProperties": { "^_": {} },
          "properties": {
            "version": { "type": "string", "const": "1.2" },
            "creator": { "$ref": "#/definitions/creator" },
            "browser": { "$ref": "#/definitions/creator" },
            "pages": { "type": "array" },
            "entries": { "type": "array", "items": { "$ref": "#/definitions/entry" } },
            "comment": { "type": "string" }
          }
        },
        "creator": {
          "type": "object", "required": ["name", "version"], "additionalProperties": false,
          "patternProperties": { "^_": {} },
          "properties": { "name": { "type": "string" }, "version": { "type": "string" }, "comment": { "type": "string" } }
        },
        "entry": {
          "type": "object",
          "required": ["startedDateTime", "time", "request", "response", "cache", "timings"],
          "additionalProperties": false, "patternProperties": { "^_": {} },
          "properties": {
            "pageref": { "type": "string" },
            "startedDateTime": { "type": "string", "format": "date-time",
              "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?(Z|[+-]\\d{2}:\\d{2})$" },
            "time": { "type": "number", "minimum": 0 },
            "request": { "$ref": "#/definitions/request" },
            "response": { "$ref": "#/definitions/response" },
            "cache": { "$ref": "#/definitions/cache" },
            "timings": { "$ref": "#/definitions/timings" },
            "serverIPAddress": { "type": "string" },
            "connection": { "type": "string" },
            "comment": { "type": "string" }
          }
        },
        "request": {
          "type": "object",
          "required": ["method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize"],
          "additionalProperties": false, "patternProperties": { "^_": {} },
          "properties": {
            "method": { "type": "string" },
            "url": { "type": "string" },
            "httpVersion": { "type": "string" },
            "cookies": { "type": "array", "items": { "$ref": "#/definitions/cookie" } },
            "headers": { "type": "array", "items": { "$ref": "#/definitions/nameValue" } },
            "queryString": { "type": "array", "items": { "$ref": "#/definitions/nameValue" } },
            "postData": { "$ref": "#/definitions/postData" },
            "headersSize": { "type": "integer", "minimum": -1 },
            "bodySize": { "type": "integer", "minimum": -1 },
            "comment": { "type": "string" }
          }
        },
        "response": {
          "type": "object",
          "required": ["status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL",
                       "headersSize", "bodySize"],
          "additionalProperties": false, "patternProperties": { "^_": {} },
          "properties": {
            "status": { "type": "integer" },
            "statusText": { "type": "string" },
            "httpVersion": { "type": "string" },
            "cookies": { "type": "array", "items": { "$ref": "#/definitions/cookie" } },
            "headers": { "type": "array", "items": { "$ref": "#/definitions/nameValue" } },
            "content": { "$ref": "#/definitions/content" },
            "redirectURL": { "type": "string" },
            "headersSize": { "type": "integer", "minimum": -1 },
            "bodySize": { "type": "integer", "minimum": -1 },
            "comment": { "type": "string" }
          }
        },
        "cookie": {
          "type": "object", "required": ["name", "value"], "additionalProperties": false,
          "patternProperties": { "^_": {} },
          "properties": {
            "name": { "type": "string" }, "value": { "type": "string" }, "path": { "type": "string" },
            "domain": { "type": "string" }, "expires": { "type": ["string", "null"] },
            "httpOnly": { "type": "boolean" }, "secure": { "type": "boolean" }, "comment": { "type": "string" }
          }
        },
        "postData": {
          "type": "object", "required": ["mimeType"], "additionalProperties": false,
          "patternProperties": { "^_": {} },
          "properties": {
            "mimeType": { "type": "string" },
            "text": { "type": "string" },
            "params": { "type": "array", "items": {
              "type": "object", "required": ["name"], "additionalProperties": false,
              "patternProperties": { "^_": {} },
              "properties": { "name": { "type": "string" }, "value": { "type": "string" },
                              "fileName": { "type": "string" }, "contentType": { "type": "string" },
                              "comment": { "type": "string" } } } },
            "comment": { "type": "string" }
          }
        },
        "content": {
          "type": "object", "required": ["size", "mimeType"], "additionalProperties": false,
          "patternProperties": { "^_": {} },
          "properties": {
            "size": { "type": "integer" }, "compression": { "type": "integer" },
            "mimeType": { "type": "string" }, "text": { "type": "string" }, "encoding": { "type": "string" },
            "comment": { "type": "string" }
          }
        },
        "cache": {
          "type": "object", "additionalProperties": false, "patternProperties": { "^_": {} },
          "properties": {
            "beforeRequest": { "type": ["object", "null"] }, "afterRequest": { "type": ["object", "null"] },
            "comment": { "type": "string" }
          }
        },
        "timings": {
          "type": "object", "required": ["send", "wait", "receive"], "additionalProperties": false,
          "patternProperties": { "^_": {} },
          "properties": {
            "blocked": { "type": "number", "minimum": -1 }, "dns": { "type": "number", "minimum": -1 },
            "connect": { "type": "number", "minimum": -1 }, "send": { "type": "number", "minimum": 0 },
            "wait": { "type": "number", "minimum": 0 }, "receive": { "type": "number", "minimum": 0 },
            "ssl": { "type": "number", "minimum": -1 }, "comment": { "type": "string" }
          }
        }
      }
    }
    """#

    /// Validates argv[2] against the schema in argv[1], then reads it with haralyzer (an independent HAR reader)
    /// and prints what the reader saw, one JSON object per entry, for the Swift side to compare.
    public static let checker = #"""
    import base64, json, sys
    import jsonschema
    from haralyzer import HarParser, HarEntry

    schema = json.load(open(sys.argv[1]))
    jsonschema.Draft7Validator.check_schema(schema)
    har = json.load(open(sys.argv[2]))
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker()).validate(har)

    parser = HarParser.from_file(sys.argv[2])
    assert parser.version == "1.2", parser.version
    assert parser.creator["name"] == "hookproxy", parser.creator
    out = []
    for raw in parser.har_data["entries"]:
        entry = HarEntry(raw)
        # content.text is optional in HAR 1.2; haralyzer's accessor assumes it is there
        body = entry.response.text if "text" in raw["response"]["content"] else None
        if body is not None and entry.response.textEncoding == "base64":
            body_bytes = list(base64.b64decode(body))
        elif body is not None:
            body_bytes = list(body.encode("utf-8"))
        else:
            body_bytes = None
        out.append({
            "method": entry.request.method, "url": entry.request.url, "status": entry.status,
            "start": entry.startTime.isoformat(), "time": entry.time,
            "request_headers": [[h["name"], h["value"]] for h in entry.request.headers],
            "response_headers": [[h["name"], h["value"]] for h in entry.response.headers],
            "query": [[q["name"], q["value"]] for q in entry.request.queryString],
            "mime": entry.response.mimeType, "body_bytes": body_bytes,
            "hookproxy": raw["_hookproxy"],
        })
    print(json.dumps(out))
    """#
}
