//! `--to-datetime` of `lograil group reset-offsets`: a date and time, as Kafka's
//! kafka-consumer-groups takes it, or epoch milliseconds.

use anyhow::{bail, Context};
use jiff::fmt::temporal::Pieces;
use jiff::tz::Offset;

/// `YYYY-MM-DDTHH:mm:SS[.sss][offset]` or epoch milliseconds → epoch milliseconds. As in
/// Kafka's `kafka-consumer-groups --to-datetime`, a time without an offset is UTC and the offset
/// is `Z`, `+01:00`, `+0100` or `+01`; parsing (calendar, ranges, year -9999..=9999) is jiff's
/// Temporal ISO 8601 grammar.
pub(crate) fn parse_datetime(text: &str) -> anyhow::Result<i64> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let bad =
        || format!("{text:?} is not YYYY-MM-DDTHH:mm:SS[.sss][Z|+HH:MM] or epoch milliseconds");
    let pieces = Pieces::parse(text).with_context(bad)?;
    // A date alone is not a point in time (Kafka's tool asks for the `T` too); a named zone
    // (`[Europe/Paris]`) would need a time zone database this binary does not carry.
    let (Some(time), None) = (pieces.time(), pieces.time_zone_annotation()) else {
        bail!(bad());
    };
    let offset = pieces.to_numeric_offset().unwrap_or(Offset::UTC);
    let at = offset
        .to_timestamp(pieces.date().to_datetime(time))
        .with_context(bad)?;
    Ok(at.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::parse_datetime;

    #[test]
    fn datetimes_parse_as_utc() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00").unwrap(), 0);
        assert_eq!(
            parse_datetime("2026-11-29T10:15:30.5Z").unwrap(),
            1_795_947_330_500
        );
        assert_eq!(
            parse_datetime("2000-02-29T00:00:00Z").unwrap(),
            951_782_400_000
        );
        assert_eq!(parse_datetime("1234").unwrap(), 1234);
        assert!(parse_datetime("2026-13-01T00:00:00").is_err());
        assert!(parse_datetime("yesterday").is_err());
    }

    #[test]
    fn a_multibyte_fraction_is_an_error_not_a_panic() {
        // The old parser cut the fraction at byte 3, inside the `é`.
        assert!(parse_datetime("2026-01-01T00:00:00.00é").is_err());
        assert!(parse_datetime("2026-01-01T00:00:00.é").is_err());
    }

    #[test]
    fn days_past_the_end_of_the_month_are_errors() {
        assert!(parse_datetime("2026-02-31T00:00:00").is_err());
        assert!(parse_datetime("2026-02-29T00:00:00").is_err());
        assert!(parse_datetime("2026-04-31T00:00:00").is_err());
        assert_eq!(
            parse_datetime("2024-02-29T00:00:00").unwrap(),
            1_709_164_800_000
        );
    }

    #[test]
    fn negative_fields_are_errors() {
        assert!(parse_datetime("2026-01-01T-1:00:00").is_err());
        assert!(parse_datetime("2026-01-01T00:-5:00").is_err());
        assert!(parse_datetime("2026-01-01T00:00:-7").is_err());
        assert!(parse_datetime("2026-01-01T00:00:00.-5").is_err());
    }

    #[test]
    fn a_huge_year_is_an_error_not_an_overflow() {
        assert!(parse_datetime("99999999999999-01-01T00:00:00").is_err());
        assert!(parse_datetime("10000-01-01T00:00:00").is_err());
    }

    #[test]
    fn zone_offsets_as_kafkas_tool_accepts_them() {
        let utc = 1_795_947_330_500; // 2026-11-29T10:15:30.5Z
        assert_eq!(parse_datetime("2026-11-29T10:15:30.500").unwrap(), utc);
        assert_eq!(parse_datetime("2026-11-29T10:15:30.500Z").unwrap(), utc);
        assert_eq!(
            parse_datetime("2026-11-29T11:15:30.500+01:00").unwrap(),
            utc
        );
        assert_eq!(parse_datetime("2026-11-29T11:15:30.500+0100").unwrap(), utc);
        assert_eq!(parse_datetime("2026-11-29T11:15:30.500+01").unwrap(), utc);
        assert_eq!(
            parse_datetime("2026-11-29T04:45:30.500-05:30").unwrap(),
            utc
        );
        assert!(parse_datetime("2026-11-29T10:15:30.500+01:60").is_err());
        assert!(parse_datetime("2026-11-29T10:15:30.500+1:00").is_err());
        // A time is needed, as in Kafka's tool.
        assert!(parse_datetime("2026-11-29").is_err());
    }
}
