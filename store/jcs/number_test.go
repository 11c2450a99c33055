package jcs_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/carmyhq/carmy/store/jcs"
)

// rfcNumbers is the number serialisation table of RFC 8785 appendix B
// (IEEE-754 bit pattern and expected ECMAScript serialisation).
var rfcNumbers = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"},
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"},
}

func TestRFCNumberTable(t *testing.T) {
	for _, tc := range rfcNumbers {
		f := math.Float64frombits(tc.bits)
		// Try several textual spellings of the same double.
		for _, in := range []string{
			strconv.FormatFloat(f, 'g', -1, 64),
			strconv.FormatFloat(f, 'e', -1, 64),
			strconv.FormatFloat(f, 'E', 25, 64),
		} {
			got, err := jcs.AppendCanonical(nil, []byte(in))
			if err != nil {
				t.Errorf("%#016x: Canonicalize(%q): %v", tc.bits, in, err)
				continue
			}
			if string(got) != tc.want {
				t.Errorf("%#016x: Canonicalize(%q) = %s, want %s", tc.bits, in, got, tc.want)
			}
		}
	}
}

func TestNumberForms(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0e10", "0"},
		{"1", "1"},
		{"1.0", "1"},
		{"1e0", "1"},
		{"10e-1", "1"},
		{"1E+0", "1"},
		{"0.1e1", "1"},
		{"-1", "-1"},
		{"123456789012345", "123456789012345"},
		{"-123456789012345", "-123456789012345"},
		{"1234567890123456", "1234567890123456"},
		{"9007199254740993", "9007199254740992"}, // beyond 2^53: collapses
		{"100000000000000000000", "100000000000000000000"},
		{"1e20", "100000000000000000000"},
		{"1e21", "1e+21"},
		{"123e20", "1.23e+22"},
		{"1E30", "1e+30"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"0.000001", "0.000001"},
		{"0.0000001", "1e-7"},
		{"1.5e-7", "1.5e-7"},
		{"-1.5e-7", "-1.5e-7"},
		{"0.000000000000000000000000001", "1e-27"},
		{"333333333.33333329", "333333333.3333333"},
		{"0.1", "0.1"},
		{"0.3", "0.3"},
		{"1e-400", "0"},  // underflows to zero, as in ECMAScript
		{"-1e-400", "0"}, // -0 prints as 0
		{"4e-324", "5e-324"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"123.456e-789", "0"},
	}
	for _, tc := range tests {
		got, err := jcs.AppendCanonical(nil, []byte(tc.in))
		if err != nil {
			t.Errorf("Canonicalize(%s): %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestNumberRoundTrip checks that the output always denotes the same
// double and is a fixed point, over a spread of magnitudes.
func TestNumberRoundTrip(t *testing.T) {
	for exp := -330; exp <= 310; exp++ {
		for _, mant := range []string{"1", "1.5", "3.3333333333333335", "9.999999999999999", "7.2057594037927933"} {
			in := mant + "e" + strconv.Itoa(exp)
			want, err := strconv.ParseFloat(in, 64)
			if err != nil {
				continue
			}
			got, err := jcs.AppendCanonical(nil, []byte(in))
			if err != nil {
				t.Fatalf("Canonicalize(%s): %v", in, err)
			}
			back, err := strconv.ParseFloat(string(got), 64)
			if err != nil || back != want {
				t.Fatalf("Canonicalize(%s) = %s, which parses as %v (%v), want %v", in, got, back, err, want)
			}
			again, err := jcs.AppendCanonical(nil, got)
			if err != nil || string(again) != string(got) {
				t.Fatalf("Canonicalize(%s) = %s (%v), not a fixed point of %s", got, again, err, in)
			}
		}
	}
}
