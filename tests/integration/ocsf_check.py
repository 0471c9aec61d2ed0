"""A minimal OCSF validator for the four classes gensee emits.

Derived by hand from the OCSF schema 1.1.0 (github.com/ocsf/ocsf-schema,
tag v1.1.0: events/base_event.json, events/network/{network,network_activity}.json,
includes/network/network_activities.json, events/system/{system,process,filesystem}.json,
events/findings/{finding,detection_finding}.json, the objects named below and
dictionary.json for types and the common enums). It is a subset: only the
attributes gensee could emit are listed, and anything else is refused, so a
typo or a wrong type fails the test instead of reaching a SIEM unnoticed.
Profiles are not applied (gensee declares none), so their attributes are
refused too.

validate(record) returns a list of problems ([] when the record is valid).
"""

import ipaddress
import re

VERSION = "1.1.0"

# dictionary.json: the enums every *_id shares, and hostname_t's regex.
SEVERITY = {0, 1, 2, 3, 4, 5, 6, 99}
STATUS = {0, 1, 2, 99}
FINDING_STATUS = {0, 1, 2, 3, 4, 99}   # finding.json overrides status_id
HOSTNAME = re.compile(r'^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\-]*[a-zA-Z0-9])\.)*'
                      r'([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\-]*[A-Za-z0-9])$')

# Objects: attribute -> type ("obj:NAME" is a nested object, a trailing []
# an array), the required ones, and enums of their own.
OBJECTS = {
    "metadata": {
        "attrs": {"version": "string_t", "product": "obj:product", "log_name": "string_t",
                  "correlation_uid": "string_t", "uid": "string_t", "profiles": "string_t[]",
                  "original_time": "string_t", "logged_time": "timestamp_t",
                  "sequence": "integer_t", "labels": "string_t[]"},
        "required": ["version", "product"],
    },
    "product": {
        "attrs": {"name": "string_t", "vendor_name": "string_t", "version": "string_t",
                  "uid": "string_t", "lang": "string_t"},
        "required": ["vendor_name"],
    },
    "network_endpoint": {
        "attrs": {"hostname": "hostname_t", "ip": "ip_t", "port": "port_t", "name": "string_t",
                  "uid": "string_t", "svc_name": "string_t", "domain": "string_t",
                  "type_id": "integer_t", "interface_name": "string_t"},
        "required": [],
        "enums": {"type_id": set(range(0, 12)) | {99}},
    },
    "network_connection_info": {
        "attrs": {"direction_id": "integer_t", "direction": "string_t",
                  "protocol_num": "integer_t", "protocol_name": "string_t", "uid": "string_t",
                  "boundary_id": "integer_t"},
        "required": ["direction_id"],
        "enums": {"direction_id": {0, 1, 2, 3, 99}},
    },
    "process": {
        "attrs": {"pid": "integer_t", "name": "string_t", "file": "obj:file",
                  "parent_process": "obj:process", "uid": "string_t", "cmd_line": "string_t",
                  "created_time": "timestamp_t", "terminated_time": "timestamp_t",
                  "tid": "integer_t", "sandbox": "string_t"},
        "required": [],
    },
    "actor": {
        "attrs": {"process": "obj:process", "invoked_by": "string_t"},
        "required": [],
    },
    "device": {
        "attrs": {"type_id": "integer_t", "hostname": "hostname_t", "name": "string_t",
                  "ip": "ip_t", "uid": "string_t", "instance_uid": "string_t"},
        "required": ["type_id"],
        "enums": {"type_id": set(range(0, 12)) | {99}},
    },
    "file": {
        "attrs": {"name": "string_t", "path": "string_t", "type_id": "integer_t",
                  "uid": "string_t", "size": "long_t", "parent_folder": "string_t"},
        "required": ["name", "type_id"],
        "enums": {"type_id": set(range(0, 8)) | {99}},
    },
    "finding_info": {
        "attrs": {"uid": "string_t", "title": "string_t", "types": "string_t[]",
                  "desc": "string_t", "created_time": "timestamp_t",
                  "first_seen_time": "timestamp_t", "last_seen_time": "timestamp_t"},
        "required": ["uid", "title"],
    },
}

# base_event.json (classification, occurrence, base): on every class.
BASE_ATTRS = {
    "activity_id": "integer_t", "activity_name": "string_t", "category_uid": "integer_t",
    "category_name": "string_t", "class_uid": "integer_t", "class_name": "string_t",
    "type_uid": "long_t", "type_name": "string_t", "time": "timestamp_t",
    "count": "integer_t", "duration": "integer_t", "start_time": "timestamp_t",
    "end_time": "timestamp_t", "timezone_offset": "integer_t", "message": "string_t",
    "metadata": "obj:metadata", "raw_data": "string_t", "severity": "string_t",
    "severity_id": "integer_t", "status": "string_t", "status_code": "string_t",
    "status_detail": "string_t", "status_id": "integer_t", "unmapped": "object",
}
BASE_REQUIRED = ["activity_id", "category_uid", "class_uid", "metadata", "severity_id", "time",
                 "type_uid"]

CLASSES = {
    4001: {  # Network Activity (category 4, network)
        "category": 4,
        "attrs": {"src_endpoint": "obj:network_endpoint", "dst_endpoint": "obj:network_endpoint",
                  "connection_info": "obj:network_connection_info", "app_name": "string_t"},
        "required": ["src_endpoint", "dst_endpoint"],
        "activities": {0, 1, 2, 3, 4, 5, 6, 99},  # Open Close Reset Fail Refuse Traffic
        "status": STATUS,
    },
    1007: {  # Process Activity (category 1, system)
        "category": 1,
        "attrs": {"process": "obj:process", "actor": "obj:actor", "device": "obj:device",
                  "exit_code": "integer_t", "actual_permissions": "integer_t",
                  "requested_permissions": "integer_t"},
        "required": ["process", "actor", "device"],
        "activities": {0, 1, 2, 3, 4, 5, 99},  # Launch Terminate Open Inject SetUID
        "status": STATUS,
    },
    1001: {  # File System Activity (category 1, system)
        "category": 1,
        "attrs": {"file": "obj:file", "actor": "obj:actor", "device": "obj:device",
                  "access_mask": "integer_t", "component": "string_t"},
        "required": ["file", "actor", "device"],
        "activities": set(range(0, 15)) | {99},  # Create .. Open (14)
        "status": STATUS,
    },
    2004: {  # Detection Finding (category 2, findings)
        "category": 2,
        "attrs": {"finding_info": "obj:finding_info", "device": "obj:device",
                  "confidence_id": "integer_t", "risk_level_id": "integer_t",
                  "comment": "string_t"},
        "required": ["finding_info"],
        "activities": {0, 1, 2, 3, 99},  # Create Update Close
        "status": FINDING_STATUS,
    },
}


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _check_type(where, t, v, out):
    if t.endswith("[]"):
        if not isinstance(v, list):
            out.append("%s: expected an array" % where)
            return
        for i, x in enumerate(v):
            _check_type("%s[%d]" % (where, i), t[:-2], x, out)
        return
    if t.startswith("obj:"):
        _check_object(where, t[4:], v, out)
    elif t in ("integer_t",):
        if not _is_int(v) or not -2**31 <= v < 2**31:
            out.append("%s: expected integer_t, got %r" % (where, v))
    elif t in ("long_t", "timestamp_t"):
        if not _is_int(v) or not -2**63 <= v < 2**63:
            out.append("%s: expected %s, got %r" % (where, t, v))
        # Epoch milliseconds: seconds would be a 1970 date.
        elif t == "timestamp_t" and v < 10**12:
            out.append("%s: %r is not epoch milliseconds" % (where, v))
    elif t == "port_t":
        if not _is_int(v) or not 0 <= v <= 65535:
            out.append("%s: expected port_t, got %r" % (where, v))
    elif t == "ip_t":
        try:
            ipaddress.ip_address(v)
        except (ValueError, TypeError):
            out.append("%s: expected ip_t, got %r" % (where, v))
    elif t == "hostname_t":
        if not isinstance(v, str) or not HOSTNAME.match(v):
            out.append("%s: expected hostname_t, got %r" % (where, v))
    elif t == "string_t":
        if not isinstance(v, str):
            out.append("%s: expected string_t, got %r" % (where, v))
    elif t == "object":
        if not isinstance(v, dict):
            out.append("%s: expected object, got %r" % (where, v))
    else:
        out.append("%s: unknown type %s in the validator" % (where, t))


def _check_attrs(where, attrs, required, enums, v, out):
    for k in required:
        if k not in v:
            out.append("%s: required attribute %s missing" % (where, k))
    for k, x in v.items():
        if k not in attrs:
            out.append("%s: attribute %s is not in the schema subset" % (where, k))
            continue
        _check_type("%s.%s" % (where, k), attrs[k], x, out)
        if k in enums and _is_int(x) and x not in enums[k]:
            out.append("%s.%s: %r is not in the enum" % (where, k, x))


def _check_object(where, name, v, out):
    if not isinstance(v, dict):
        out.append("%s: expected object %s, got %r" % (where, name, v))
        return
    o = OBJECTS[name]
    _check_attrs(where, o["attrs"], o["required"], o.get("enums", {}), v, out)


def validate(rec):
    out = []
    if not isinstance(rec, dict):
        return ["not an object"]
    cls = CLASSES.get(rec.get("class_uid"))
    if cls is None:
        return ["class_uid %r is not one of %r" % (rec.get("class_uid"), sorted(CLASSES))]
    attrs = dict(BASE_ATTRS)
    attrs.update(cls["attrs"])
    enums = {"severity_id": SEVERITY, "status_id": cls["status"],
             "activity_id": cls["activities"]}
    _check_attrs("event", attrs, BASE_REQUIRED + cls["required"], enums, rec, out)
    if rec.get("category_uid") != cls["category"]:
        out.append("category_uid %r, expected %d" % (rec.get("category_uid"), cls["category"]))
    if _is_int(rec.get("activity_id")) and \
            rec.get("type_uid") != rec["class_uid"] * 100 + rec["activity_id"]:
        out.append("type_uid %r != class_uid * 100 + activity_id" % rec.get("type_uid"))
    if isinstance(rec.get("metadata"), dict) and rec["metadata"].get("version") != VERSION:
        out.append("metadata.version %r, expected %s" % (rec["metadata"].get("version"), VERSION))
    return out
