package api

import (
	"bytes"
	"sync"
)

// responseStore keeps the items of recent responses in memory, so that a
// later request may continue one (previous_response_id) or refer to its
// items (item_reference: the AI SDK sends those for earlier assistant
// turns unless told store false). It holds at most maxStoredBytes of
// items; the oldest responses go first. Nothing survives a restart.
type responseStore struct {
	mu    sync.Mutex
	resps map[string]storedResponse
	items map[string]jsonValue // item id -> the item's JSON
	refs  map[string]int       // item id -> stored responses holding it
	order []string             // response ids, oldest first
	bytes int
}

type storedResponse struct {
	items []jsonValue // input items, then output items (JSON text)
	ids   []string    // ids of the items indexed in responseStore.items
	bytes int
}

// maxStoredBytes bounds the memory the store holds (JSON size of items).
const maxStoredBytes = 64 << 20

// put stores response id with its input and output items. It keeps
// copies: input items are slices of a request body that goes back to its
// pool.
func (st *responseStore) put(id string, input, output []jsonValue) {
	all := make([]jsonValue, 0, len(input)+len(output))
	sr := storedResponse{}
	for _, it := range append(input[:len(input):len(input)], output...) {
		sr.bytes += len(it)
		if sr.bytes > maxStoredBytes {
			return
		}
		all = append(all, bytes.Clone(it))
	}
	sr.items = all
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.resps == nil {
		st.resps, st.items, st.refs = map[string]storedResponse{}, map[string]jsonValue{}, map[string]int{}
	}
	for _, it := range all {
		if v := it.member("id"); v.isString() {
			if iid := v.str(); iid != "" {
				st.items[iid] = it
				st.refs[iid]++
				sr.ids = append(sr.ids, iid)
			}
		}
	}
	st.resps[id] = sr
	st.order = append(st.order, id)
	st.bytes += sr.bytes
	for st.bytes > maxStoredBytes && len(st.order) > 0 {
		old := st.resps[st.order[0]]
		for _, iid := range old.ids {
			if st.refs[iid]--; st.refs[iid] <= 0 {
				delete(st.items, iid)
				delete(st.refs, iid)
			}
		}
		delete(st.resps, st.order[0])
		st.bytes -= old.bytes
		st.order = st.order[1:]
	}
}

// response returns the items of a stored response (input then output).
func (st *responseStore) response(id string) ([]jsonValue, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	sr, ok := st.resps[id]
	return sr.items, ok
}

// item returns a stored item by its id.
func (st *responseStore) item(id string) (jsonValue, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	it, ok := st.items[id]
	return it, ok
}
