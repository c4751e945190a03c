import Foundation

/// `text` as a terminal should show it: every character that would act on the terminal instead
/// of being shown is escaped, Swift-style. A key or file name can hold a newline or an escape
/// sequence (`\u{1B}[2J` clears the screen); printed raw, it would forge lines or rewrite the
/// terminal. Control characters become `\n`, `\r`, `\t` or `\u{1B}`; so do the invisible
/// characters that reorder or break text (bidirectional overrides and isolates, line and
/// paragraph separators). Everything else, any script and combining marks, is kept.
///
/// A backslash is kept as it is, so that a name the store reports with `\xff` for a byte that
/// is not UTF-8 reads as that. JSON output needs none of this: the encoder escapes.
func terminalSafe(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: actsOnTerminal) else { return text }
    var safe = ""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n": safe += "\\n"
        case "\r": safe += "\\r"
        case "\t": safe += "\\t"
        case _ where actsOnTerminal(scalar): safe += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        default: safe.unicodeScalars.append(scalar)
        }
    }
    return safe
}

/// True for a scalar that a terminal acts on rather than shows: C0 and C1 controls (ESC, CSI),
/// DEL, and the format characters that reorder or break a line.
private func actsOnTerminal(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x00...0x1F, 0x7F...0x9F: return true
    case 0x061C, 0x200E, 0x200F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return true
    default: return false
    }
}

/// Prints one line of text output, with names and keys in it made ``terminalSafe(_:)``.
func printLine(_ line: String) {
    print(terminalSafe(line))
}

/// How many terminal columns `text` takes: one per grapheme cluster (a letter with its
/// combining marks is one), two for the wide characters of East Asian scripts and emoji.
func displayWidth(_ text: String) -> Int {
    text.reduce(0) { width, character in
        guard let first = character.unicodeScalars.first?.value else { return width }
        switch first {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF, 0xAC00...0xD7A3,
            0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD:
            return width + 2
        default:
            return width + 1
        }
    }
}
