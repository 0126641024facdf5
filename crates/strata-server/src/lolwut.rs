//! LOLWUT's computer art (Redis's lolwut5.c and lolwut6.c): version 5 draws Georg Nees's
//! "Schotter" (squares more and more rotated and displaced row by row) on a pixel canvas
//! rendered as Braille characters (2x4 pixels each); version 6 draws a city skyline in
//! four grey levels as ANSI-coloured spaces. The random parts differ from Redis's; sizes,
//! limits, characters and the closing lines are Redis's.
//!
//! Layer: protocol and errors (a building block with no server state).

/// A canvas of pixels (0: off, or a colour) (Redis's `lwCanvas`).
struct Canvas {
    width: i64,
    height: i64,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i64, height: i64, bg: u8) -> Canvas {
        let (w, h) = (width.max(0), height.max(0));
        Canvas {
            width: w,
            height: h,
            pixels: vec![bg; (w * h) as usize],
        }
    }

    fn set(&mut self, x: i64, y: i64, color: u8) {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i64, y: i64) -> u8 {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham's line from (x1, y1) to (x2, y2).
    fn line(&mut self, (mut x1, mut y1): (i64, i64), (x2, y2): (i64, i64), color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred on (x, y), rotated by `angle` radians: its corners
    /// on the circle through them, a quarter turn apart.
    fn square(&mut self, x: i64, y: i64, size: f32, angle: f32) {
        let r = (size / std::f32::consts::SQRT_2).round();
        let corners: Vec<(i64, i64)> = (0..4)
            .map(|j| {
                let k =
                    std::f32::consts::FRAC_PI_4 + angle + j as f32 * std::f32::consts::FRAC_PI_2;
                (
                    (k.sin() * r + x as f32).round() as i64,
                    (k.cos() * r + y as f32).round() as i64,
                )
            })
            .collect();
        for j in 0..4 {
            self.line(corners[j], corners[(j + 1) % 4], 1);
        }
    }
}

/// A random number in [0, 1].
fn unit() -> f32 {
    rand::random::<f32>()
}

/// LOLWUT VERSION 5 [columns [squares-per-row [squares-per-col]]] (defaults 66, 8, 12;
/// limits 1-1000, 1-200, 1-200).
pub fn schotter(cols: i64, per_row: i64, per_col: i64, version: &str) -> String {
    let cols = cols.clamp(1, 1000);
    let per_row = per_row.clamp(1, 200);
    let per_col = per_col.clamp(1, 200);
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i64 + padding * 2;
    let mut c = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i64;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i64;
            let mut angle = 0.0;
            if y > 1 {
                let jitter = || {
                    let v = unit() / per_col as f32 * y as f32;
                    if rand::random::<bool>() {
                        -v
                    } else {
                        v
                    }
                };
                angle = jitter();
                sx += (jitter() * side / 3.0) as i64;
                sy += (jitter() * side / 3.0) as i64;
            }
            c.square(sx, sy, side, angle);
        }
    }
    let mut out = String::new();
    let mut y = 0;
    while y < c.height {
        let mut x = 0;
        while x < c.width {
            // Braille dots 1-8 of the 2x4 cell.
            let dots = [
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 1),
                (1, 2),
                (0, 3),
                (1, 3),
            ];
            let bits = dots.iter().enumerate().fold(0u32, |b, (i, &(dx, dy))| {
                b | (u32::from(c.get(x + dx, y + dy) != 0) << i)
            });
            out.push(char::from_u32(0x2800 + bits).unwrap_or(' '));
            x += 2;
        }
        if y != c.height - 1 {
            out.push('\n');
        }
        y += 4;
    }
    out.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    out.push_str(version);
    out.push('\n');
    out
}

/// LOLWUT VERSION 6 [columns [rows]] (defaults 80, 20; limits 1-1000): a skyline of
/// buildings with lit windows against a white sky, in ANSI grey levels.
pub fn skyline(cols: i64, rows: i64, version: &str) -> String {
    let w = cols.clamp(1, 1000);
    let h = rows.clamp(1, 1000);
    // 0 black, 1 grey, 2 light grey, 3 white.
    let mut c = Canvas::new(w, h, 3);
    // Two layers of buildings: far ones grey, near ones black with lit windows.
    for (layer, color) in [(0u32, 1u8), (1, 0)] {
        let mut x = 0;
        while x < w {
            let bw = 4 + (rand::random::<u32>() % 8) as i64;
            let top_share = if layer == 0 { 0.2 } else { 0.45 };
            let bh = ((h as f32) * (top_share + unit() * 0.45)) as i64;
            for bx in x..(x + bw).min(w) {
                for by in (h - bh).max(0)..h {
                    let window = layer == 1
                        && (bx - x) % 2 == 1
                        && (h - by) % 3 == 0
                        && bx < x + bw - 1
                        && !rand::random::<u32>().is_multiple_of(3);
                    c.set(bx, by, if window { 2 } else { color });
                }
            }
            x += bw + (rand::random::<u32>() % 3) as i64;
        }
    }
    let mut out = String::new();
    for y in 0..h {
        for x in 0..w {
            let code = match c.get(x, y) {
                0 => "0;30;40",
                1 => "0;90;100",
                2 => "0;37;47",
                _ => "0;97;107",
            };
            out.push_str("\x1b[");
            out.push_str(code);
            out.push_str("m \x1b[0m");
        }
        out.push('\n');
    }
    out.push_str("Dedicated to the 8 bit game developers of past and present.\n");
    out.push_str("Original 8 bit image from Plaguemon by hikikomori. Redis ver. ");
    out.push_str(version);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schotter_sizes_and_the_smallest_canvas() {
        // One column: a 2-pixel canvas without padding, one square of side 2.
        assert_eq!(
            schotter(0, 0, 0, "7.0.0"),
            "\u{280b}\n\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.0\n"
        );
        let art = schotter(66, 8, 12, "7.0.0");
        let lines: Vec<&str> = art.lines().collect();
        // 132x(16*12+4 = 196) pixels: 66 characters by 49 rows, then (the last row not
        // being the canvas's last pixel row) an empty line, as Redis's.
        assert_eq!(lines.len(), 51);
        assert_eq!(lines[49], "");
        assert!(lines[..49].iter().all(|l| l.chars().count() == 66));
        assert!(lines[..49]
            .iter()
            .all(|l| l.chars().all(|c| ('\u{2800}'..='\u{28ff}').contains(&c))));
    }

    #[test]
    fn skyline_is_rows_of_coloured_cells() {
        let art = skyline(10, 3, "7.0.0");
        let lines: Vec<&str> = art.lines().collect();
        assert_eq!(lines.len(), 5);
        for l in &lines[..3] {
            assert_eq!(l.matches("m \x1b[0m").count(), 10, "{l:?}");
        }
        assert_eq!(
            lines[4],
            "Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.0"
        );
    }
}
