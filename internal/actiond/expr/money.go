package expr

import (
	"encoding/json"
	"fmt"
	"time"
)

// Money is an exact amount in one currency, an ISO 4217 code of three
// upper-case letters. Amounts of different currencies never mix.
type Money struct {
	Amount   Decimal
	Currency string
}

// NewMoney checks the currency code and pairs it with the amount.
func NewMoney(amount Decimal, currency string) (Money, error) {
	if !isCurrencyCode(currency) {
		return Money{}, fmt.Errorf("money: currency %q is not an ISO 4217 code of three upper-case letters, such as USD", currency)
	}
	return Money{Amount: amount, Currency: currency}, nil
}

func isCurrencyCode(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// String prints "5.00 USD".
func (m Money) String() string { return m.Amount.String() + " " + m.Currency }

// MarshalJSON writes {"amount": "5.00", "currency": "USD"}.
func (m Money) MarshalJSON() ([]byte, error) {
	return json.Marshal(m.JSON())
}

// JSON is the money as the plain value Eval returns.
func (m Money) JSON() map[string]any {
	return map[string]any{"amount": m.Amount.String(), "currency": m.Currency}
}

func (m Money) sameCurrency(other Money) error {
	if m.Currency != other.Currency {
		return fmt.Errorf("money: cannot combine %s with %s", m.Currency, other.Currency)
	}
	return nil
}

// Date is a calendar date without a time zone.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

const dateLayout = "2006-01-02"

// ParseDate reads a date written YYYY-MM-DD.
func ParseDate(text string) (Date, error) {
	t, err := time.Parse(dateLayout, text)
	if err != nil || len(text) != len(dateLayout) {
		return Date{}, fmt.Errorf("date: %q is not a date written YYYY-MM-DD", text)
	}
	return DateOf(t), nil
}

// DateOf is the UTC calendar date of t.
func DateOf(t time.Time) Date {
	y, m, d := t.UTC().Date()
	return Date{Year: y, Month: m, Day: d}
}

// Time is midnight UTC at the start of the date.
func (d Date) Time() time.Time { return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, time.UTC) }

// String prints YYYY-MM-DD.
func (d Date) String() string { return d.Time().Format(dateLayout) }

// MarshalJSON writes the date as a JSON string.
func (d Date) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// Cmp compares two dates: -1, 0 or +1.
func (d Date) Cmp(other Date) int { return d.Time().Compare(other.Time()) }
