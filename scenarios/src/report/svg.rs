//! A hand-written SVG plot of heap completeness over simulated time: per receiver, the
//! running count of complete heaps (a step line) with every incomplete heap marked by a
//! cross at the time it was delivered.

use std::fmt::Write as _;

use crate::outcome::ReceiverReport;

const COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// "Nice" tick step for a range of `span` split into about `n` parts.
fn tick_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// The plot: `labels[i]` names receiver `i`.
pub fn plot(title: &str, receivers: &[ReceiverReport], labels: &[String]) -> String {
    let (w, h) = (1000.0, 480.0);
    let (l, r, t, b) = (70.0, 270.0, 40.0, 50.0);
    let pw = w - l - r;
    let ph = h - t - b;
    let t_max = receivers
        .iter()
        .flat_map(|x| x.heaps.iter().map(|h| h.at_ns))
        .max()
        .unwrap_or(0)
        .max(1) as f64
        / 1e6;
    let y_max = receivers
        .iter()
        .map(|x| x.heaps.iter().filter(|h| h.complete).count())
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let x = |ms: f64| l + ms / t_max * pw;
    let y = |n: f64| t + ph - n / y_max * ph;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>"#,
        l + pw / 2.0,
        esc(title)
    );
    // Axes and grid.
    let xs = tick_step(t_max, 8.0);
    let mut v = 0.0;
    while v <= t_max * 1.000_001 {
        let px = x(v);
        let _ = writeln!(
            out,
            r##"<line x1="{px:.1}" y1="{t}" x2="{px:.1}" y2="{:.1}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            t + ph,
            t + ph + 16.0,
            fmt_num(v)
        );
        v += xs;
    }
    let ys = tick_step(y_max, 6.0).max(1.0);
    let mut v = 0.0;
    while v <= y_max * 1.000_001 {
        let py = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{l}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            l + pw,
            l - 6.0,
            py + 4.0,
            fmt_num(v)
        );
        v += ys;
    }
    let _ = writeln!(
        out,
        r##"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">simulated time (ms)</text>"#,
        l + pw / 2.0,
        h - 12.0
    );
    let _ = writeln!(
        out,
        r#"<text x="16" y="{:.1}" text-anchor="middle" transform="rotate(-90 16 {:.1})">complete heaps (cumulative)</text>"#,
        t + ph / 2.0,
        t + ph / 2.0
    );
    // One step line per receiver, crosses for incomplete heaps.
    for (i, rep) in receivers.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let mut pts = vec![(x(0.0), y(0.0))];
        let mut n = 0.0;
        let mut crosses = String::new();
        for hp in &rep.heaps {
            let px = x(hp.at_ns as f64 / 1e6);
            if hp.complete {
                pts.push((px, y(n)));
                n += 1.0;
                pts.push((px, y(n)));
            } else {
                let py = y(n);
                let _ = write!(crosses, "M{:.1},{:.1}l6,6m-6,0l6,-6 ", px - 3.0, py - 3.0);
            }
        }
        let path: Vec<String> = pts.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="1.5"/>"#,
            path.join(" ")
        );
        if !crosses.is_empty() {
            let _ = writeln!(
                out,
                r#"<path d="{}" stroke="{c}" stroke-width="1.5" fill="none"/>"#,
                crosses.trim_end()
            );
        }
        let ly = t + 10.0 + 36.0 * i as f64;
        let complete = rep.heaps.iter().filter(|h| h.complete).count();
        let label = labels
            .get(i)
            .map_or_else(|| format!("receiver {i}"), Clone::clone);
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text><text x="{:.1}" y="{:.1}" fill="#555">{} complete, {} incomplete (x)</text>"##,
            l + pw + 12.0,
            l + pw + 32.0,
            l + pw + 38.0,
            ly + 4.0,
            esc(&label),
            l + pw + 38.0,
            ly + 18.0,
            complete,
            rep.heaps.len() - complete
        );
    }
    out.push_str("</svg>\n");
    out
}

fn fmt_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as i64)
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::ReceivedHeap;

    #[test]
    fn plot_is_well_formed_and_marks_incomplete_heaps() {
        let heap = |cnt, complete, at_ns| ReceivedHeap {
            cnt,
            complete,
            digest: None,
            received: 10,
            heap_len: 10,
            at_ns,
        };
        let rep = ReceiverReport {
            heaps: vec![
                heap(1, true, 1000),
                heap(2, false, 2000),
                heap(3, true, 3000),
            ],
            ..ReceiverReport::default()
        };
        let svg = plot("t <1>", &[rep], &["r0 & co".into()]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("t &lt;1&gt;") && svg.contains("r0 &amp; co"));
        assert!(svg.contains("2 complete, 1 incomplete"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<path").count(), 1);
        assert_eq!(tick_step(7.3, 8.0), 1.0);
        assert_eq!(fmt_num(0.25), "0.25");
    }
}
