package api

import "strconv"

// chunkBuf builds the JSON of the most frequent stream chunks (text only,
// no logprobs) by appending into a reused buffer, so each SSE event of a
// plain stream allocates nothing. Other chunks go through encoding/json.
type chunkBuf struct {
	head []byte // {"id":…,"object":…,"created":…,"model":…,"choices":[{
	buf  []byte
}

func newChunkBuf(id, object string, created int64, model string) *chunkBuf {
	h := append([]byte(`{"id":`), appendJSONString(nil, id)...)
	h = append(h, `,"object":"`...)
	h = append(h, object...)
	h = append(h, `","created":`...)
	h = strconv.AppendInt(h, created, 10)
	h = append(h, `,"model":`...)
	h = appendJSONString(h, model)
	h = append(h, `,"choices":[{`...)
	return &chunkBuf{head: h, buf: make([]byte, 0, 512)}
}

// chatContent returns the chunk of a chat content delta (valid until the
// next call).
func (c *chunkBuf) chatContent(index int, content []byte) []byte {
	c.buf = append(c.buf[:0], c.head...)
	c.buf = append(c.buf, `"index":`...)
	c.buf = strconv.AppendInt(c.buf, int64(index), 10)
	c.buf = append(c.buf, `,"delta":{"content":`...)
	c.buf = appendJSONBytes(c.buf, content)
	c.buf = append(c.buf, `},"finish_reason":null}]}`...)
	return c.buf
}

// completionText returns the chunk of a completion text piece.
func (c *chunkBuf) completionText(index int, text []byte) []byte {
	c.buf = append(c.buf[:0], c.head...)
	c.buf = append(c.buf, `"text":`...)
	c.buf = appendJSONBytes(c.buf, text)
	c.buf = append(c.buf, `,"index":`...)
	c.buf = strconv.AppendInt(c.buf, int64(index), 10)
	c.buf = append(c.buf, `,"logprobs":null,"finish_reason":null}]}`...)
	return c.buf
}

// appendJSONBytes is appendJSONString for a byte slice, without copying it
// to a string.
func appendJSONBytes(dst, b []byte) []byte {
	return appendJSONString(dst, unsafeString(b))
}
