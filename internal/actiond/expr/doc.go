package expr

// The platform's CEL functions, besides standard CEL (timestamp, duration and
// the rest) and the strings extension (ext.Strings: "a".upperAscii(),
// strings.quote(s), …):
//
//	uuid(string) string            parses a UUID in any form google/uuid accepts and
//	                               returns it canonical (lower case, hyphenated);
//	                               an invalid one is an error. UUIDs are strings, so
//	                               they compare with strings and marshal as strings.
//	decimal(string|int) decimal    an exact decimal ("10.50" keeps its scale)
//	  + - * / and unary -          decimal with decimal; exact, except that products
//	                               and quotients keep at most MaxDecimalScale (34)
//	                               fractional digits, rounded half to even
//	  < <= > >= ==                 numeric: decimal("10.50") == decimal("10.5")
//	  d.round(places)              half to even
//	  string(d)                    "10.50"
//	money(string|decimal, string) money
//	                               an amount and an ISO 4217 code of three upper-case
//	                               letters
//	  money + money, money - money same currency only, otherwise an error
//	  money * decimal|int, decimal * money, money / decimal|int, -money
//	  < <= > >= ==                 same currency only
//	  m.amount() decimal, m.currency() string, string(m) "5.00 USD"
//	date(string|timestamp) date    "YYYY-MM-DD"; a timestamp's UTC date
//	  < <= > >= ==, string(d), timestamp(d) (midnight UTC)
//
// Only with the Impure option:
//
//	uuid.New() string              a random (version 4) UUID from the injected source
//	time.Now() timestamp           the injected clock's time, UTC
//
// Eval returns JSON-shaped values: null → nil, bool, int → int64,
// uint → uint64, double → float64 (NaN and infinities are errors), string,
// bytes → []byte, timestamp → RFC 3339 string (UTC), duration → CEL's
// string form ("90s"), decimal → string ("10.50"), money →
// {"amount": "5.00", "currency": "USD"}, date → "YYYY-MM-DD", lists → []any,
// maps → map[string]any (int, uint and bool keys become strings).
//
// Inputs are JSON-shaped too, so a JSON number arrives as a double:
// `execution.input.count > 1` works (numeric comparisons cross types), but
// arithmetic needs a conversion, as in `int(execution.input.count) + 1`.
