package expr

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Decimal limits. A ledger amount never needs more; the bounds keep a hostile
// expression from building numbers whose arithmetic costs more than its CEL
// cost estimate admits.
const (
	// MaxDecimalScale is the number of fractional digits a decimal keeps.
	// Products and quotients with more are rounded half to even.
	MaxDecimalScale = 34
	// MaxDecimalDigits bounds the digits of a decimal's unscaled value.
	MaxDecimalDigits = 100
)

var (
	errDecimalSyntax     = errors.New("decimal: not a decimal number")
	errDecimalOverflow   = fmt.Errorf("decimal: more than %d digits", MaxDecimalDigits)
	errDivisionByZero    = errors.New("decimal: division by zero")
	errDecimalFraction   = fmt.Errorf("decimal: more than %d fractional digits", MaxDecimalScale)
	bigTen               = big.NewInt(10)
	maxUnscaledExclusive = new(big.Int).Exp(bigTen, big.NewInt(MaxDecimalDigits), nil)
)

// Decimal is an exact base-10 number: unscaled × 10^-scale. It never passes
// through float64. The zero value is 0. Decimals are immutable.
type Decimal struct {
	unscaled *big.Int
	scale    int32
}

// ParseDecimal reads an optionally signed decimal such as "10.50", "-3",
// ".5" or "1.2e3". The scale of the text is kept: "10.50" prints as "10.50".
func ParseDecimal(text string) (Decimal, error) {
	s := strings.TrimSpace(text)
	if s == "" || len(s) > 2*MaxDecimalDigits {
		return Decimal{}, fmt.Errorf("%w: %q", errDecimalSyntax, text)
	}
	mantissa, exponent := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.ParseInt(s[i+1:], 10, 32)
		if err != nil || e > MaxDecimalDigits || e < -MaxDecimalDigits {
			return Decimal{}, fmt.Errorf("%w: %q", errDecimalSyntax, text)
		}
		mantissa, exponent = s[:i], e
	}
	sign := ""
	if mantissa != "" && (mantissa[0] == '+' || mantissa[0] == '-') {
		sign, mantissa = mantissa[:1], mantissa[1:]
	}
	whole, fraction, _ := strings.Cut(mantissa, ".")
	if whole == "" && fraction == "" || !allDigits(whole) || !allDigits(fraction) {
		return Decimal{}, fmt.Errorf("%w: %q", errDecimalSyntax, text)
	}
	unscaled, ok := new(big.Int).SetString(sign+whole+fraction, 10)
	if !ok {
		return Decimal{}, fmt.Errorf("%w: %q", errDecimalSyntax, text)
	}
	scale := int64(len(fraction)) - exponent
	if scale < 0 {
		unscaled.Mul(unscaled, pow10(int(-scale)))
		scale = 0
	}
	if scale > MaxDecimalScale {
		return Decimal{}, fmt.Errorf("%w: %q", errDecimalFraction, text)
	}
	return checked(unscaled, int32(scale))
}

// MustParseDecimal is ParseDecimal for constants known to be valid.
func MustParseDecimal(text string) Decimal {
	d, err := ParseDecimal(text)
	if err != nil {
		panic(err)
	}
	return d
}

// DecimalFromInt returns n as a decimal with scale 0.
func DecimalFromInt(n int64) Decimal {
	return Decimal{unscaled: big.NewInt(n)}
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func pow10(n int) *big.Int {
	return new(big.Int).Exp(bigTen, big.NewInt(int64(n)), nil)
}

func checked(unscaled *big.Int, scale int32) (Decimal, error) {
	if new(big.Int).Abs(unscaled).Cmp(maxUnscaledExclusive) >= 0 {
		return Decimal{}, errDecimalOverflow
	}
	return Decimal{unscaled: unscaled, scale: scale}, nil
}

func (d Decimal) value() *big.Int {
	if d.unscaled == nil {
		return new(big.Int)
	}
	return d.unscaled
}

// Scale is the number of fractional digits the decimal carries.
func (d Decimal) Scale() int { return int(d.scale) }

// Sign is -1, 0 or +1.
func (d Decimal) Sign() int { return d.value().Sign() }

// String prints the decimal with exactly Scale fractional digits.
func (d Decimal) String() string {
	digits := new(big.Int).Abs(d.value()).String()
	sign := ""
	if d.value().Sign() < 0 {
		sign = "-"
	}
	if d.scale == 0 {
		return sign + digits
	}
	if pad := int(d.scale) + 1 - len(digits); pad > 0 {
		digits = strings.Repeat("0", pad) + digits
	}
	cut := len(digits) - int(d.scale)
	return sign + digits[:cut] + "." + digits[cut:]
}

// MarshalJSON writes the decimal as a JSON string, so no reader turns it into
// a float.
func (d Decimal) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(d.String())), nil
}

// rescale returns the unscaled value of d at a larger scale.
func (d Decimal) rescale(scale int32) *big.Int {
	if scale == d.scale {
		return d.value()
	}
	return new(big.Int).Mul(d.value(), pow10(int(scale-d.scale)))
}

func aligned(a, b Decimal) (*big.Int, *big.Int, int32) {
	scale := max(a.scale, b.scale)
	return a.rescale(scale), b.rescale(scale), scale
}

// Cmp compares a and b numerically: -1, 0 or +1.
func (d Decimal) Cmp(other Decimal) int {
	x, y, _ := aligned(d, other)
	return x.Cmp(y)
}

// Add returns d + other at the larger of the two scales.
func (d Decimal) Add(other Decimal) (Decimal, error) {
	x, y, scale := aligned(d, other)
	return checked(new(big.Int).Add(x, y), scale)
}

// Sub returns d - other at the larger of the two scales.
func (d Decimal) Sub(other Decimal) (Decimal, error) {
	x, y, scale := aligned(d, other)
	return checked(new(big.Int).Sub(x, y), scale)
}

// Neg returns -d.
func (d Decimal) Neg() Decimal {
	return Decimal{unscaled: new(big.Int).Neg(d.value()), scale: d.scale}
}

// Mul returns d × other. Its scale is the sum of the scales, rounded half to
// even down to MaxDecimalScale when larger.
func (d Decimal) Mul(other Decimal) (Decimal, error) {
	product := new(big.Int).Mul(d.value(), other.value())
	scale := d.scale + other.scale
	if scale > MaxDecimalScale {
		product = roundHalfEven(product, new(big.Int).Set(pow10(int(scale-MaxDecimalScale))))
		scale = MaxDecimalScale
	}
	return checked(product, scale)
}

// Quo returns d ÷ other. An exact quotient is exact; one that does not
// terminate within MaxDecimalScale fractional digits is rounded half to even
// there. Trailing zeros are trimmed, but never below the larger operand scale,
// so 10.50 ÷ 2 is 5.25 and 10.00 ÷ 4 is 2.50.
func (d Decimal) Quo(other Decimal) (Decimal, error) {
	if other.value().Sign() == 0 {
		return Decimal{}, errDivisionByZero
	}
	// d/o = (du·10^-ds)/(ou·10^-os); at scale S the unscaled quotient is
	// du·10^(S-ds+os)/ou.
	shift := int(MaxDecimalScale) - int(d.scale) + int(other.scale)
	numerator := new(big.Int).Set(d.value())
	denominator := new(big.Int).Set(other.value())
	if shift >= 0 {
		numerator.Mul(numerator, pow10(shift))
	} else {
		denominator.Mul(denominator, pow10(-shift))
	}
	quotient := roundHalfEven(numerator, denominator)
	return checked(trimZeros(quotient, MaxDecimalScale, max(d.scale, other.scale)))
}

// Round returns d rounded half to even to places fractional digits (0 ≤ places
// ≤ MaxDecimalScale). A decimal with fewer digits is returned unchanged.
func (d Decimal) Round(places int) (Decimal, error) {
	if places < 0 || places > MaxDecimalScale {
		return Decimal{}, fmt.Errorf("decimal: round to %d places: places must be between 0 and %d", places, MaxDecimalScale)
	}
	if int(d.scale) <= places {
		return d, nil
	}
	rounded := roundHalfEven(new(big.Int).Set(d.value()), pow10(int(d.scale)-places))
	return checked(rounded, int32(places))
}

// roundHalfEven returns n/q rounded half to even. It may modify n.
func roundHalfEven(n, q *big.Int) *big.Int {
	quotient, remainder := new(big.Int).QuoRem(n, q, new(big.Int))
	if remainder.Sign() == 0 {
		return quotient
	}
	twice := new(big.Int).Abs(remainder)
	twice.Lsh(twice, 1)
	cmp := twice.Cmp(new(big.Int).Abs(q))
	if cmp > 0 || cmp == 0 && quotient.Bit(0) == 1 {
		if n.Sign()*q.Sign() < 0 {
			quotient.Sub(quotient, big.NewInt(1))
		} else {
			quotient.Add(quotient, big.NewInt(1))
		}
	}
	return quotient
}

func trimZeros(n *big.Int, scale, floor int32) (*big.Int, int32) {
	remainder := new(big.Int)
	for scale > floor && n.Sign() != 0 {
		quotient, r := new(big.Int).QuoRem(n, bigTen, remainder)
		if r.Sign() != 0 {
			break
		}
		n, scale = quotient, scale-1
	}
	if n.Sign() == 0 {
		scale = floor
	}
	return n, scale
}
