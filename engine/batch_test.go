package engine

// logitsIf returns a RowOut asking for logits when on, for nothing
// otherwise.
func logitsIf(on bool) RowOut {
	if on {
		return RowOut{Kind: OutLogits}
	}
	return RowOut{}
}
