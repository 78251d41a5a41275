// SPDX-License-Identifier: MulanPSL-2.0

package policy

import (
	"math"
	"strconv"
	"strings"
	"unicode"
)

// The policy's texts are compared with Python's byte for byte (the vectors), so numbers and
// strings are written as Python's format specs and repr() write them.

// general is Python's f"{v:g}": six significant digits, trailing zeros dropped.
func general(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// fixed0 is Python's f"{v:.0f}" (both round the exact binary value half to even).
func fixed0(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// pyIsSpace is Python's str.isspace for one character: Go's unicode.IsSpace plus the
// information separators U+001C-U+001F.
func pyIsSpace(r rune) bool { return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f) }

// pyStrip is Python's str.strip().
func pyStrip(s string) string { return strings.TrimFunc(s, pyIsSpace) }

// pyHead is Python's s[:n]: the first n characters.
func pyHead(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// pyRepr is Python's repr() of a str.
func pyRepr(s string) string {
	quote := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		quote = '"'
	}
	var b strings.Builder
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x` + hex(uint32(r), 2))
		case r < 0x7f || (r > 0xa0 && unicode.IsPrint(r) && r != 0xad):
			b.WriteRune(r)
		case r <= 0xff:
			b.WriteString(`\x` + hex(uint32(r), 2))
		case r <= 0xffff:
			b.WriteString(`\u` + hex(uint32(r), 4))
		default:
			b.WriteString(`\U` + hex(uint32(r), 8))
		}
	}
	b.WriteByte(quote)
	return b.String()
}

func hex(v uint32, width int) string {
	text := strconv.FormatUint(uint64(v), 16)
	return strings.Repeat("0", width-len(text)) + text
}

// ParseFloat is Python's float() of a str: decimal literals with single underscores between digits,
// inf, infinity and nan (any case, signed), surrounding whitespace allowed; no hexadecimal. As
// Python, it first reads non-ASCII spaces as ' ' and non-ASCII decimal digits as their digit.
func ParseFloat(text string) (float64, bool) {
	s := strings.Trim(asciiNumber(text), " \t\n\v\f\r")
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, false
	}
	switch strings.ToLower(body) {
	case "nan":
		return math.NaN(), true
	case "inf", "infinity":
		if strings.HasPrefix(s, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if !decimalLiteral(body) {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil {
		// Out of range: Python gives inf or 0 where Go reports ErrRange with the same value.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return v, true
		}
		return 0, false
	}
	return v, true
}

// decimalLiteral: digits[.digits][(e|E)[sign]digits], either side of the point may be empty (not
// both), an underscore only between two digits.
func decimalLiteral(s string) bool {
	mantissa, exponent, hasExp := s, "", false
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mantissa, exponent, hasExp = s[:i], s[i+1:], true
	}
	whole, frac, hasPoint := strings.Cut(mantissa, ".")
	if whole == "" && frac == "" {
		return false
	}
	if (whole != "" && !digits(whole)) || (frac != "" && !digits(frac)) || (!hasPoint && frac != "") {
		return false
	}
	if hasExp {
		if exponent != "" && (exponent[0] == '+' || exponent[0] == '-') {
			exponent = exponent[1:]
		}
		return digits(exponent)
	}
	return true
}

// digits: ASCII digits, an underscore only between two of them.
func digits(s string) bool {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' {
			if s[i-1] == '_' {
				return false
			}
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// asciiNumber is Python's _PyUnicode_TransformDecimalAndSpaceToASCII: a non-ASCII space becomes ' ',
// a non-ASCII decimal digit its ASCII digit, everything else stays.
func asciiNumber(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x80 {
			return r
		}
		if pyIsSpace(r) {
			return ' '
		}
		if d, ok := decimalDigit(r); ok {
			return '0' + d
		}
		return r
	}, s)
}

// decimalDigit is the value of a Unicode decimal digit (category Nd): its ranges are runs of whole
// blocks of ten, each starting at a zero.
func decimalDigit(r rune) (rune, bool) {
	for _, rg := range unicode.Nd.R16 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) && rg.Stride == 1 {
			return (r - rune(rg.Lo)) % 10, true
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if rune(rg.Lo) <= r && r <= rune(rg.Hi) && rg.Stride == 1 {
			return (r - rune(rg.Lo)) % 10, true
		}
	}
	return 0, false
}
