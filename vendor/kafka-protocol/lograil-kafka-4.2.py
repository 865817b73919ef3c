# lograil patch: brings the share-group messages to Kafka 4.2 definitions (see LOGRAIL-PATCH.md).
# Run once in src/messages of the pristine 0.18.0 crate (after the tagged-field sed).
import re, sys
P = "// lograil patch: Kafka 4.2 message definitions"
def widen(s, lo, hi):
    s = s.replace("if version != %d {" % lo, "if !(%d..=%d).contains(&version) { %s" % (lo, hi, P))
    s = s.replace("VersionRange { min: %d, max: %d }" % (lo, lo), "VersionRange { min: %d, max: %d }" % (lo, hi))
    s = s.replace("/// Valid versions: %d\n" % lo, "/// Valid versions: %d-%d\n" % (lo, hi))
    return s

def past_block(s, a):
    """From a line start `a`, skips the rest of a version-guarded block just inserted."""
    while True:
        line = s[a:s.index("\n", a) + 1]
        if line.startswith("        }") or line.startswith("            bail!") or line.startswith("            total_size") or line.startswith("            %s" % "") and False:
            a += len(line)
        else:
            return a

def add_field(s, struct, after, name, ty, enc, default, minv, doc, dflt_check, ignorable=False):
    """Adds field `name` (type ty, codec enc like 'types::Int8') to `struct` after field `after`, present from version minv."""
    i = s.index("pub struct %s {" % struct)
    j = s.index("pub %s:" % after, i)
    j = s.index("\n", j) + 1
    s = s[:j] + "\n    /// %s\n    ///\n    /// Supported API versions: %d+ (%s)\n    pub %s: %s,\n" % (doc, minv, P[3:], name, ty) + s[j:]
    # setter
    k = s.index("impl %s {" % struct)
    k = s.index("\n", k) + 1
    s = s[:k] + "    /// Sets `%s` to the passed value.\n    pub fn with_%s(mut self, value: %s) -> Self {\n        self.%s = value;\n        self\n    }\n" % (name, name, ty, name) + s[k:]
    # encode / compute_size / decode / default, each located after the struct's impl
    enc_i = s.index("impl Encodable for %s {" % struct)
    a = past_block(s, s.index("(buf, &self.%s)?;\n" % after, enc_i) + len("(buf, &self.%s)?;\n" % after))
    check = "" if ignorable else (" else if self.%s != %s {\n            bail!(\"A field is set that is not available on the selected protocol version\");\n        }" % (name, dflt_check))
    s = s[:a] + ("        if version >= %d {\n            %s.encode(buf, &self.%s)?;\n        }%s\n" % (minv, enc, name, check if check else "")) + s[a:]
    a = past_block(s, s.index("compute_size(&self.%s)?;\n" % after, enc_i) + len("compute_size(&self.%s)?;\n" % after))
    s = s[:a] + ("        if version >= %d {\n            total_size += %s.compute_size(&self.%s)?;\n        }\n" % (minv, enc, name)) + s[a:]
    dec_i = s.index("impl Decodable for %s {" % struct)
    a = s.index("let %s = " % after, dec_i)
    a = s.index("        };\n", a) + len("        };\n") if s[s.index("\n", a) - 1] == "{" else s.index("\n", a) + 1
    s = s[:a] + ("        let %s = if version >= %d {\n            %s.decode(buf)?\n        } else {\n            %s\n        };\n" % (name, minv, enc, default)) + s[a:]
    a = s.index("            %s,\n" % after, a) + len("            %s,\n" % after)
    s = s[:a] + "            %s,\n" % name + s[a:]
    d = s.index("impl Default for %s {" % struct)
    a = s.index("            %s:" % after, d); a = s.index("\n", a) + 1
    s = s[:a] + "            %s: %s,\n" % (name, default) + s[a:]
    return s

def edit(path, f):
    s = open(path).read(); s2 = f(s); assert s2 != s, path; open(path, "w").write(s2)

edit("share_fetch_request.rs", lambda s: add_field(add_field(widen(s, 1, 2), "ShareFetchRequest", "batch_size", "share_acquire_mode", "i8", "types::Int8", "0", 2, "The acquire mode: 0 batch-optimized, 1 record-limit.", "0", True), "ShareFetchRequest", "share_acquire_mode", "is_renew_ack", "bool", "types::Boolean", "false", 2, "Whether Renew acknowledgements are present.", "false"))
edit("share_fetch_response.rs", lambda s: widen(s, 1, 2))
edit("share_acknowledge_request.rs", lambda s: add_field(widen(s, 1, 2), "ShareAcknowledgeRequest", "share_session_epoch", "is_renew_ack", "bool", "types::Boolean", "false", 2, "Whether Renew acknowledgements are present.", "false"))
edit("share_acknowledge_response.rs", lambda s: add_field(widen(s, 1, 2), "ShareAcknowledgeResponse", "error_message", "acquisition_lock_timeout_ms", "i32", "types::Int32", "0", 2, "The time in ms for which the acquired records are locked.", "0", True))
edit("describe_share_group_offsets_request.rs", lambda s: widen(s, 0, 1))
edit("describe_share_group_offsets_response.rs", lambda s: add_field(widen(s, 0, 1), "DescribeShareGroupOffsetsResponsePartition", "leader_epoch", "lag", "i64", "types::Int64", "-1", 1, "The share-partition lag.", "-1", True))
