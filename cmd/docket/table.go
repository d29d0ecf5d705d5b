package main

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// payloadWidth is how much of a payload a table shows; --json and
// `docket task ID` show all of it.
const payloadWidth = 40

// cell is s for one table cell: quoted where it holds spaces, control
// characters or invalid UTF-8 (so a column never breaks), and cut to
// width runes with "..." when longer.
func cell(s string, width int) string {
	if s == "" {
		return "-"
	}
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '"' }) {
		s = strconv.Quote(s)
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-3]) + "..."
}
