package testutil

// FuzzBytes hands out the bytes of a fuzz input, then zeros, for a fuzz target that builds a
// structured value from its input: every input makes a valid value, and the fuzzer steers it.
type FuzzBytes struct{ b []byte }

// NewFuzzBytes returns a FuzzBytes reading data.
func NewFuzzBytes(data []byte) *FuzzBytes { return &FuzzBytes{b: data} }

// Byte returns the next byte of the input, or 0 once it is used up.
func (r *FuzzBytes) Byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// Pick returns a number in [0, n) taken from the next byte; n must be positive.
func (r *FuzzBytes) Pick(n int) int { return int(r.Byte()) % n }
