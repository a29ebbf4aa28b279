//! Durations as operators type them (`500ms`, `30s`, `15m`, `12h`, `7d`)
//! and times as operators read them (UTC, to the second).
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds per unit, longest suffix first so `ms` wins over `m`.
const UNITS: [(&str, u64); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Parse `NUMBER UNIT` into milliseconds. A unit is required: a bare number
/// would leave "30" meaning 30 ms to one reader and 30 s to another.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(format!(
            "{text:?} is not a duration: write a whole number and a unit, like 500ms, 30s, 15m, 12h or 7d"
        ));
    }
    let Some(&(_, per)) = UNITS.iter().find(|(suffix, _)| *suffix == unit) else {
        return Err(format!(
            "{text:?} has no known unit: use ms, s, m, h or d (like 30s)"
        ));
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is too large"))?;
    match n.checked_mul(per) {
        Some(0) => Err(format!("{text:?} is zero: a duration must be positive")),
        Some(ms) => Ok(ms),
        None => Err(format!("{text:?} is too large")),
    }
}

/// Milliseconds since the Unix epoch, by this machine's clock.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `2026-03-01T12:00:05Z`: the kernel's milliseconds as a UTC time.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A time relative to `now`: `in 29s`, `3m ago`.
pub fn relative(ms: u64, now: u64) -> String {
    if ms >= now {
        format!("in {}", short(ms - now))
    } else {
        format!("{} ago", short(now - ms))
    }
}

/// A time for tables: absolute and relative, `2026-03-01T12:00:05Z (in 29s)`.
pub fn when(ms: u64, now: u64) -> String {
    format!("{} ({})", utc(ms), relative(ms, now))
}

/// The largest whole unit: `500ms`, `29s`, `14m`, `3h`, `2d`.
pub fn short(ms: u64) -> String {
    let (suffix, per) = UNITS
        .iter()
        .rev()
        .find(|(_, per)| ms >= *per)
        .copied()
        .unwrap_or(("ms", 1));
    format!("{}{suffix}", ms / per)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm), so no date crate is needed for one format.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_a_positive_number() {
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("30s"), Ok(30_000));
        assert_eq!(parse_duration("15m"), Ok(900_000));
        assert_eq!(parse_duration("12h"), Ok(43_200_000));
        assert_eq!(parse_duration("7d"), Ok(604_800_000));
        for bad in [
            "30",
            "",
            "s",
            "0s",
            "-5s",
            "1.5s",
            "5 sec",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn utc_matches_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_700_000_000_999), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn short_uses_the_largest_whole_unit() {
        assert_eq!(short(500), "500ms");
        assert_eq!(short(29_999), "29s");
        assert_eq!(short(14 * 60_000 + 5), "14m");
        assert_eq!(short(2 * 86_400_000), "2d");
        assert_eq!(relative(1_000, 0), "in 1s");
        assert_eq!(relative(0, 180_000), "3m ago");
    }
}
