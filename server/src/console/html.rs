//! The console's HTML: the one place text becomes markup. Everything the broker did not write
//! itself (topic, group and client names, record keys, values and headers, tenants) goes in
//! through [`Html::text`] or [`Html::bytes`], which escape it; markup goes in only as
//! `&'static str`, so no untrusted string can be passed as markup by mistake.

use std::fmt::Write as _;

/// A page being written.
#[derive(Debug, Default)]
pub struct Html(String);

/// `text` HTML-escaped as [`Html::text`] writes it: safe inside element text and attribute
/// values of HTML and SVG (the demo's report writes its text with it too).
pub fn escape(text: &str) -> String {
    let mut html = Html::default();
    html.text(text);
    html.0
}

/// Characters of a name shown in a link or a cell before it is cut.
pub const NAME_LIMIT: usize = 256;

impl Html {
    /// Markup written by the console itself.
    pub fn raw(&mut self, markup: &'static str) -> &mut Html {
        self.0.push_str(markup);
        self
    }

    /// Text, HTML-escaped (quotes too, so it is safe inside an attribute value); control
    /// characters shown as `\u{..}`.
    pub fn text(&mut self, text: &str) -> &mut Html {
        for c in text.chars() {
            self.char(c);
        }
        self
    }

    fn char(&mut self, c: char) {
        match c {
            '&' => self.0.push_str("&amp;"),
            '<' => self.0.push_str("&lt;"),
            '>' => self.0.push_str("&gt;"),
            '"' => self.0.push_str("&quot;"),
            '\'' => self.0.push_str("&#39;"),
            c if c.is_control() && c != '\n' => {
                let _ = write!(self.0, "\\u{{{:x}}}", u32::from(c));
            }
            c => self.0.push(c),
        }
    }

    /// Bytes that may be anything (a record key or value): the UTF-8 parts as escaped text,
    /// other bytes as `\xNN`, at most `limit` bytes of them followed by the total size when
    /// cut.
    pub fn bytes(&mut self, bytes: &[u8], limit: usize) -> &mut Html {
        let shown = &bytes[..bytes.len().min(limit)];
        // Consecutive invalid bytes (one chunk each) share one span.
        let mut in_bin = false;
        for chunk in shown.utf8_chunks() {
            if !chunk.valid().is_empty() && in_bin {
                self.raw("</span>");
                in_bin = false;
            }
            for c in chunk.valid().chars() {
                self.char(c);
            }
            if !chunk.invalid().is_empty() && !in_bin {
                self.raw("<span class=\"bin\">");
                in_bin = true;
            }
            for b in chunk.invalid() {
                let _ = write!(self.0, "\\x{b:02x}");
            }
        }
        if in_bin {
            self.raw("</span>");
        }
        if shown.len() < bytes.len() {
            self.raw("<span class=\"cut\">… (")
                .size(bytes.len() as u64)
                .raw(" in all)</span>");
        }
        self
    }

    /// A name (topic, group, client, tenant), cut at [`NAME_LIMIT`] characters.
    pub fn name(&mut self, name: &str) -> &mut Html {
        match name.char_indices().nth(NAME_LIMIT) {
            Some((end, _)) => self.text(&name[..end]).raw("…"),
            None => self.text(name),
        }
    }

    pub fn int(&mut self, n: i64) -> &mut Html {
        let _ = write!(self.0, "{n}");
        self
    }

    /// Seconds with one decimal, or `—` when unknown.
    pub fn seconds(&mut self, s: Option<f64>) -> &mut Html {
        match s {
            Some(s) => {
                let _ = write!(self.0, "{s:.1} s");
            }
            None => self.0.push('—'),
        }
        self
    }

    /// A rate a second with one decimal, or `—` when unknown.
    pub fn rate(&mut self, r: Option<f64>) -> &mut Html {
        match r {
            Some(r) => {
                let _ = write!(self.0, "{r:.1}/s");
            }
            None => self.0.push('—'),
        }
        self
    }

    /// Bytes as B, KiB, MiB or GiB.
    pub fn size(&mut self, bytes: u64) -> &mut Html {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = bytes as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < units.len() {
            value /= 1024.0;
            unit += 1;
        }
        let _ = match unit {
            0 => write!(self.0, "{bytes} B"),
            _ => write!(self.0, "{value:.1} {}", units[unit]),
        };
        self
    }

    /// Milliseconds since the epoch as UTC `YYYY-MM-DD HH:MM:SS.mmm`.
    pub fn time(&mut self, ms: i64) -> &mut Html {
        let secs = ms.div_euclid(1000);
        let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil(days);
        let _ = write!(
            self.0,
            "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:03}",
            rest / 3600,
            rest % 3600 / 60,
            rest % 60,
            ms.rem_euclid(1000)
        );
        self
    }

    /// A link to one of the console's own pages with `query` pairs, percent-encoded.
    pub fn link(&mut self, path: &'static str, query: &[(&str, &str)], label: &str) -> &mut Html {
        self.raw("<a href=\"").raw(path).query(query);
        self.raw("\">").name(label).raw("</a>")
    }

    /// A link to the page of topic `name` (`suffix` after it: `""`, or `"/messages"` for its
    /// records), with `query` pairs; the name percent-encoded.
    pub fn topic_link(
        &mut self,
        name: &str,
        suffix: &'static str,
        query: &[(&str, &str)],
        label: &str,
    ) -> &mut Html {
        self.raw("<a href=\"/topics/");
        self.0.push_str(&percent_encode(name));
        self.raw(suffix).query(query);
        self.raw("\">").name(label).raw("</a>")
    }

    /// A link to the page of group `id` (percent-encoded: a group id may hold any character),
    /// labelled with the id.
    pub fn group_link(&mut self, id: &str) -> &mut Html {
        self.id_link("/groups/", id)
    }

    /// A link to the page of share group `id`, labelled with the id.
    pub fn share_link(&mut self, id: &str) -> &mut Html {
        self.id_link("/shares/", id)
    }

    fn id_link(&mut self, prefix: &'static str, id: &str) -> &mut Html {
        self.raw("<a href=\"").raw(prefix);
        self.0.push_str(&percent_encode(id));
        self.raw("\">").name(id).raw("</a>")
    }

    fn query(&mut self, query: &[(&str, &str)]) -> &mut Html {
        for (i, (k, v)) in query.iter().enumerate() {
            self.raw(if i == 0 { "?" } else { "&amp;" });
            self.0.push_str(&percent_encode(k));
            self.0.push('=');
            self.0.push_str(&percent_encode(v));
        }
        self
    }

    /// Bytes as hex, 16 to a line with their position, at most `limit` of them followed by
    /// the total size when cut.
    pub fn hex(&mut self, bytes: &[u8], limit: usize) -> &mut Html {
        let shown = &bytes[..bytes.len().min(limit)];
        for (line, chunk) in shown.chunks(16).enumerate() {
            let _ = write!(self.0, "{:06x} ", line * 16);
            for b in chunk {
                let _ = write!(self.0, " {b:02x}");
            }
            self.0.push('\n');
        }
        if shown.len() < bytes.len() {
            self.raw("<span class=\"cut\">… (")
                .size(bytes.len() as u64)
                .raw(" in all)</span>");
        }
        self
    }

    /// Horizontal bars, one per `(label, value)`, scaled to the largest; `unit` after each
    /// value. Inline SVG: no script, no external asset.
    pub fn bars(&mut self, rows: &[(String, f64)], unit: &'static str) -> &mut Html {
        if rows.is_empty() {
            return self.raw("<p class=\"none\">nothing to chart</p>");
        }
        let max = rows.iter().map(|r| r.1).fold(0.0f64, f64::max).max(1e-9);
        let height = rows.len() * 22;
        let _ = write!(
            self.0,
            "<svg class=\"bars\" role=\"img\" width=\"640\" height=\"{height}\" viewBox=\"0 0 640 {height}\">"
        );
        for (i, (label, value)) in rows.iter().enumerate() {
            let y = i * 22;
            let width = (value / max * 380.0).max(1.0);
            let _ = write!(
                self.0,
                "<rect x=\"200\" y=\"{}\" width=\"{width:.1}\" height=\"16\" class=\"bar\"></rect>\
                 <text x=\"194\" y=\"{}\" text-anchor=\"end\">",
                y + 2,
                y + 15
            );
            self.name(label);
            let _ = write!(
                self.0,
                "</text><text x=\"{:.1}\" y=\"{}\">{value:.1}",
                206.0 + width,
                y + 15
            );
            self.raw(unit).raw("</text>");
        }
        self.raw("</svg>")
    }

    /// A sparkline of `points` (oldest first) scaled to the largest.
    pub fn sparkline(&mut self, points: &[f64]) -> &mut Html {
        if points.len() < 2 {
            return self.raw("—");
        }
        let max = points.iter().copied().fold(0.0f64, f64::max).max(1e-9);
        let step = 120.0 / (points.len() - 1) as f64;
        self.raw("<svg class=\"spark\" width=\"120\" height=\"24\" viewBox=\"0 0 120 24\"><polyline points=\"");
        for (i, p) in points.iter().enumerate() {
            let _ = write!(
                self.0,
                "{:.1},{:.1} ",
                i as f64 * step,
                23.0 - p / max * 22.0
            );
        }
        self.raw("\"></polyline></svg>")
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decodes a percent-encoded query value (`+` is a space); `None` when malformed or not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                let hex = std::str::from_utf8(&hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(f: impl FnOnce(&mut Html)) -> String {
        let mut h = Html::default();
        f(&mut h);
        h.into_string()
    }

    #[test]
    fn untrusted_text_is_escaped() {
        assert_eq!(
            html(|h| {
                h.text("<script>alert('x')</script> & \"q\" \u{1b}");
            }),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot; \\u{1b}"
        );
    }

    #[test]
    fn invalid_utf8_shows_as_escaped_bytes_and_large_values_are_cut() {
        assert_eq!(
            html(|h| {
                h.bytes(b"ok\xff\xfe<", 100);
            }),
            "ok<span class=\"bin\">\\xff\\xfe</span>&lt;"
        );
        let big = vec![b'a'; 1 << 20];
        let shown = html(|h| {
            h.bytes(&big, 10);
        });
        assert_eq!(
            shown,
            "aaaaaaaaaa<span class=\"cut\">… (1.0 MiB in all)</span>"
        );
        // A multi-byte character cut in the middle shows its first bytes as bytes.
        assert_eq!(
            html(|h| {
                h.bytes("é".as_bytes(), 1);
            }),
            "<span class=\"bin\">\\xc3</span><span class=\"cut\">… (2 B in all)</span>"
        );
    }

    #[test]
    fn links_percent_encode_and_escape() {
        assert_eq!(
            html(|h| {
                h.link("/dead-letters", &[("topic", "a b&<"), ("p", "1")], "<x>");
            }),
            "<a href=\"/dead-letters?topic=a%20b%26%3C&amp;p=1\">&lt;x&gt;</a>"
        );
        assert_eq!(percent_decode("a%20b%26%3C+c").as_deref(), Some("a b&< c"));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn topic_links_encode_the_name_and_hex_is_cut() {
        assert_eq!(
            html(|h| {
                h.topic_link("a<b", "/messages", &[("partition", "1")], "a<b");
            }),
            "<a href=\"/topics/a%3Cb/messages?partition=1\">a&lt;b</a>"
        );
        assert_eq!(
            html(|h| {
                h.hex(&[0u8, 0xff, b'<'], 2);
            }),
            "000000  00 ff\n<span class=\"cut\">… (3 B in all)</span>"
        );
    }

    #[test]
    fn times_are_utc() {
        assert_eq!(
            html(|h| {
                h.time(1_700_000_000_123);
            }),
            "2023-11-14 22:13:20.123"
        );
    }
}
