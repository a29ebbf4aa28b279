//! Go source as `gofmt` prints it, for the generated files: the generators
//! write one declaration or statement a line, indented with tabs, and mark
//! with [`CELL`] where gofmt aligns columns (after a struct field's name
//! and type, a constant's name and type, a composite literal's `key:`);
//! [`gofmt`] pads the cells as gofmt's tabwriter does: a column is aligned
//! over a run of consecutive lines, at the same indentation, that all have
//! a cell in it, to the widest cell plus one space. A line without the
//! column (a comment line, a blank line, a line with fewer cells) ends the
//! run. `emit::go::tests` checks the generated files with `gofmt -l` where
//! Go is installed.

/// Ends an aligned cell.
pub const CELL: char = '\u{b}';

/// `text` with every [`CELL`] replaced by gofmt's padding.
pub fn gofmt(text: &str) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    // (indentation, terminated cells, trailing text)
    let parsed: Vec<(&str, Vec<&str>, &str)> = lines
        .iter()
        .map(|line| {
            let rest = line.trim_start_matches('\t');
            let indent = &line[..line.len() - rest.len()];
            let mut cells: Vec<&str> = rest.split(CELL).collect();
            let trailing = cells.pop().unwrap_or("");
            (indent, cells, trailing)
        })
        .collect();
    let mut widths: Vec<Vec<usize>> = parsed.iter().map(|(_, c, _)| vec![0; c.len()]).collect();
    let columns = parsed.iter().map(|(_, c, _)| c.len()).max().unwrap_or(0);
    for col in 0..columns {
        let mut i = 0;
        while i < parsed.len() {
            if parsed[i].1.len() <= col {
                i += 1;
                continue;
            }
            let start = i;
            let indent = parsed[i].0;
            while i < parsed.len() && parsed[i].1.len() > col && parsed[i].0 == indent {
                i += 1;
            }
            let width = parsed[start..i]
                .iter()
                .map(|(_, c, _)| c[col].chars().count())
                .max()
                .unwrap_or(0);
            for w in &mut widths[start..i] {
                w[col] = width;
            }
        }
    }
    let mut out = String::with_capacity(text.len());
    for (n, (indent, cells, trailing)) in parsed.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        out.push_str(indent);
        for (col, cell) in cells.iter().enumerate() {
            out.push_str(cell);
            let pad = widths[n][col] + 1 - cell.chars().count();
            out.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(trailing);
        // gofmt leaves no trailing blanks (a last cell without text after it).
        let end = out.trim_end_matches(' ').len();
        out.truncate(end);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_over_runs_of_lines() {
        let text = "type A struct {\n\tKind\u{b}Kind\n\tLease\u{b}Lease\u{b}// Granted\n\tResult\u{b}[]byte\u{b}// Replayed\n\t// a comment\n\tID\u{b}string\n}\n";
        assert_eq!(
            gofmt(text),
            "type A struct {\n\tKind   Kind\n\tLease  Lease  // Granted\n\tResult []byte // Replayed\n\t// a comment\n\tID string\n}\n"
        );
    }
}
