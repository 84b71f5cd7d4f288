package text

// Index is an inverted index: term → the documents (by key K) holding it
// and their score for it. It is not safe for concurrent use; its owner
// locks it with the documents.
type Index[K comparable] struct {
	postings map[string]map[K]float64
}

// NewIndex returns an empty index.
func NewIndex[K comparable]() *Index[K] {
	return &Index[K]{postings: map[string]map[K]float64{}}
}

// Add records k's term scores.
func (ix *Index[K]) Add(k K, scores map[string]float64) {
	for term, sc := range scores {
		p := ix.postings[term]
		if p == nil {
			p = map[K]float64{}
			ix.postings[term] = p
		}
		p[k] = sc
	}
}

// Remove forgets k's terms (the scores it was added with).
func (ix *Index[K]) Remove(k K, scores map[string]float64) {
	for term := range scores {
		if p := ix.postings[term]; p != nil {
			delete(p, k)
			if len(p) == 0 {
				delete(ix.postings, term)
			}
		}
	}
}

// Search returns the documents holding any of terms with their textScore:
// the sum of their scores for those terms, added in the order of terms.
func (ix *Index[K]) Search(terms []string) map[K]float64 {
	out := map[K]float64{}
	for _, t := range terms {
		for k, sc := range ix.postings[t] {
			out[k] += sc
		}
	}
	return out
}

// Terms is the number of distinct terms indexed.
func (ix *Index[K]) Terms() int { return len(ix.postings) }
