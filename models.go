package sturdy

import (
	"time"
)

// WriteModel is one write of a BulkWrite: *InsertOneModel, *UpdateOneModel,
// *UpdateManyModel, *ReplaceOneModel, *DeleteOneModel or *DeleteManyModel
// (the value forms are accepted too).
type WriteModel interface{ writeModel() }

// InsertOneModel inserts Document; an _id is generated if it has none.
type InsertOneModel struct {
	Document any
}

// UpdateOneModel applies Update (a document of $-operators or a pipeline)
// to the first document matching Filter.
type UpdateOneModel struct {
	Filter       any
	Update       any
	Upsert       bool
	ArrayFilters []any
	Collation    *Collation
	Hint         any
	Sort         any // MongoDB 8.0+
}

// UpdateManyModel applies Update to every document matching Filter.
type UpdateManyModel struct {
	Filter       any
	Update       any
	Upsert       bool
	ArrayFilters []any
	Collation    *Collation
	Hint         any
}

// ReplaceOneModel replaces the first document matching Filter.
type ReplaceOneModel struct {
	Filter      any
	Replacement any
	Upsert      bool
	Collation   *Collation
	Hint        any
	Sort        any // MongoDB 8.0+
}

// DeleteOneModel deletes the first document matching Filter.
type DeleteOneModel struct {
	Filter    any
	Collation *Collation
	Hint      any
}

// DeleteManyModel deletes every document matching Filter.
type DeleteManyModel struct {
	Filter    any
	Collation *Collation
	Hint      any
}

func (InsertOneModel) writeModel()  {}
func (UpdateOneModel) writeModel()  {}
func (UpdateManyModel) writeModel() {}
func (ReplaceOneModel) writeModel() {}
func (DeleteOneModel) writeModel()  {}
func (DeleteManyModel) writeModel() {}

// ClientWriteModel is one write of Client.BulkWrite: Model (any WriteModel)
// applied to collection Collection of database Database.
type ClientWriteModel struct {
	Database   string
	Collection string
	Model      WriteModel
}

// Collation selects language-specific string comparison rules.
type Collation struct {
	Locale          string `bson:"locale"`
	CaseLevel       bool   `bson:"caseLevel,omitempty"`
	CaseFirst       string `bson:"caseFirst,omitempty"`
	Strength        int    `bson:"strength,omitempty"`
	NumericOrdering bool   `bson:"numericOrdering,omitempty"`
	Alternate       string `bson:"alternate,omitempty"`
	MaxVariable     string `bson:"maxVariable,omitempty"`
	Normalization   bool   `bson:"normalization,omitempty"`
	Backwards       bool   `bson:"backwards,omitempty"`
}

// IndexModel describes an index for CreateIndex: Keys is an ordered
// document such as bson.D{{"a", 1}, {"b", -1}}.
type IndexModel struct {
	Keys    any
	Options *IndexOptions
}

// IndexOptions are the optional properties of an index. Nil fields are not
// sent. The default name joins keys and directions: "a_1_b_-1".
type IndexOptions struct {
	Name                    *string
	Unique                  *bool
	Sparse                  *bool
	Hidden                  *bool
	ExpireAfterSeconds      *int32
	PartialFilterExpression any
	Collation               *Collation
	// Version is the index version ("v"); default nil: the server's.
	Version *int32
	// Weights, DefaultLanguage and LanguageOverride configure text
	// indexes; WildcardProjection selects the fields of a wildcard index.
	Weights            any
	DefaultLanguage    *string
	LanguageOverride   *string
	WildcardProjection any
}

// ReturnDocument chooses which version of the document FindOneAndUpdate and
// FindOneAndReplace return.
type ReturnDocument int

const (
	// Before returns the document as it was before the change (the default).
	Before ReturnDocument = iota
	// After returns the document as it is after the change.
	After
)

// DatabaseOptions override the client's defaults for one Database (and the
// collections taken from it). Nil fields inherit.
type DatabaseOptions struct {
	WriteConcern     *WriteConcern
	ReadPreference   *ReadPreference
	ReadConcernLevel string
	// Timeout is the timeoutMS of the database's (or collection's)
	// operations: nil inherits, a pointer to 0 means no limit; a negative
	// value makes every operation fail with an argument error.
	Timeout *time.Duration
}

// CollectionOptions override the database's defaults for one Collection.
type CollectionOptions = DatabaseOptions

// InsertOneOptions are the options of InsertOne.
type InsertOneOptions struct {
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Comment                  any
	Session                  *Session // explicit session; nil uses an implicit one
}

// InsertManyOptions are the options of InsertMany.
type InsertManyOptions struct {
	Ordered                  *bool // nil means true: stop at the first error
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Comment                  any
	Session                  *Session
}

// UpdateOptions are the options of UpdateOne and UpdateMany.
type UpdateOptions struct {
	Upsert                   bool
	ArrayFilters             []any
	Collation                *Collation
	Hint                     any
	Let                      any
	Sort                     any // UpdateOne only, MongoDB 8.0+
	Comment                  any
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Session                  *Session
}

// ReplaceOptions are the options of ReplaceOne.
type ReplaceOptions struct {
	Upsert                   bool
	Collation                *Collation
	Hint                     any
	Let                      any
	Sort                     any // MongoDB 8.0+
	Comment                  any
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Session                  *Session
}

// DeleteOptions are the options of DeleteOne and DeleteMany.
type DeleteOptions struct {
	Collation *Collation
	Hint      any
	Let       any
	Comment   any
	Session   *Session
}

// BulkWriteOptions are the options of BulkWrite.
type BulkWriteOptions struct {
	Ordered                  *bool // nil means true
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Let                      any
	Comment                  any
	Session                  *Session
}

// ClientBulkWriteOptions are the options of Client.BulkWrite.
type ClientBulkWriteOptions struct {
	Ordered *bool // nil means true: stop at the first write error
	// VerboseResults asks for the result of every model (InsertResults,
	// UpdateResults, DeleteResults); by default only the counts are
	// returned, which spares the server and the network one result per
	// model.
	VerboseResults           bool
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Let                      any   // variables for the filters and updates ($$name)
	Comment                  any
	WriteConcern             *WriteConcern // nil: the client's; refused inside a transaction
	Session                  *Session
}

// FindOptions are the options of Find. Limit 0 means no limit; a negative
// Limit asks for a single batch of at most -Limit documents.
type FindOptions struct {
	Sort                any
	Projection          any
	Skip                int64
	Limit               int64
	BatchSize           int32
	Hint                any
	Min, Max            any
	Collation           *Collation
	Let                 any
	Comment             any
	MaxTime             time.Duration
	AllowDiskUse        *bool
	AllowPartialResults bool
	NoCursorTimeout     bool
	ReturnKey           bool
	ShowRecordID        bool
	Session             *Session
	// TimeoutMode says how timeoutMS bounds the cursor; it needs a
	// timeoutMS. Default "": TimeoutCursorLifetime, or for a tailable
	// cursor TimeoutIteration, its only mode.
	TimeoutMode TimeoutMode
	// CursorType makes the cursor tailable (on a capped collection).
	// Under timeoutMS each Next of a tailable cursor gets the whole
	// timeoutMS; only a TailableAwait cursor's find carries maxTimeMS.
	CursorType CursorType
	// MaxAwaitTime is how long a TailableAwait cursor's getMore waits for
	// new documents on the server (getMore's maxTimeMS; capped by the
	// time left under timeoutMS, and it must be less than the timeoutMS).
	// Default 0: the server's (1 s). Ignored for other cursor types.
	MaxAwaitTime time.Duration
}

// FindOneOptions are the options of FindOne.
type FindOneOptions struct {
	Sort         any
	Projection   any
	Skip         int64
	Hint         any
	Collation    *Collation
	Let          any
	Comment      any
	MaxTime      time.Duration
	ReturnKey    bool
	ShowRecordID bool
	Session      *Session
}

// FindOneAndUpdateOptions are the options of FindOneAndUpdate.
type FindOneAndUpdateOptions struct {
	ReturnDocument           ReturnDocument
	Upsert                   bool
	Sort                     any
	Projection               any
	ArrayFilters             []any
	Collation                *Collation
	Hint                     any
	Let                      any
	Comment                  any
	MaxTime                  time.Duration
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Session                  *Session
}

// FindOneAndReplaceOptions are the options of FindOneAndReplace.
type FindOneAndReplaceOptions struct {
	ReturnDocument           ReturnDocument
	Upsert                   bool
	Sort                     any
	Projection               any
	Collation                *Collation
	Hint                     any
	Let                      any
	Comment                  any
	MaxTime                  time.Duration
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Session                  *Session
}

// FindOneAndDeleteOptions are the options of FindOneAndDelete.
type FindOneAndDeleteOptions struct {
	Sort       any
	Projection any
	Collation  *Collation
	Hint       any
	Let        any
	Comment    any
	MaxTime    time.Duration
	Session    *Session
}

// AggregateOptions are the options of Aggregate.
type AggregateOptions struct {
	BatchSize                int32
	AllowDiskUse             *bool
	Collation                *Collation
	Hint                     any
	Let                      any
	Comment                  any
	MaxTime                  time.Duration
	BypassDocumentValidation *bool // nil: not sent (the server's default, false)
	Session                  *Session
	TimeoutMode              TimeoutMode // see FindOptions.TimeoutMode
	// MaxAwaitTime is sent as the getMores' maxTimeMS: the await time of
	// an awaitData cursor (a $changeStream pipeline). Under timeoutMS it
	// must be less than the timeoutMS. Default 0: not sent.
	MaxAwaitTime time.Duration
}

// CountOptions are the options of CountDocuments.
type CountOptions struct {
	Skip      int64
	Limit     int64
	Hint      any
	Collation *Collation
	Comment   any
	MaxTime   time.Duration
	Session   *Session
}

// EstimatedDocumentCountOptions are the options of EstimatedDocumentCount.
type EstimatedDocumentCountOptions struct {
	Comment any
	MaxTime time.Duration
	Session *Session
}

// DistinctOptions are the options of Distinct.
type DistinctOptions struct {
	Collation *Collation
	Hint      any
	Comment   any
	MaxTime   time.Duration
	Session   *Session
}

// CreateIndexOptions are the options of CreateIndex and CreateIndexes.
type CreateIndexOptions struct {
	// CommitQuorum is how many data-bearing members must finish building
	// the indexes before the primary commits them: an int, "majority" or
	// "votingMembers" (the server's default). Default nil: not sent.
	CommitQuorum any
	Comment      any
	MaxTime      time.Duration
	Session      *Session
}

// DropIndexOptions are the options of DropIndex, DropIndexByKeys and
// DropIndexes.
type DropIndexOptions struct {
	Comment any
	MaxTime time.Duration
	Session *Session
}

// RenameOptions are the options of Collection.Rename.
type RenameOptions struct {
	// DropTarget replaces an existing collection of the new name.
	DropTarget bool
	Comment    any
	Session    *Session
}

// DropCollectionOptions are the options of Collection.Drop.
type DropCollectionOptions struct {
	Session *Session
}

// DropDatabaseOptions are the options of Database.Drop.
type DropDatabaseOptions struct {
	Session *Session
}

// RunCommandOptions are the options of Database.RunCommand.
type RunCommandOptions struct {
	ReadPreference *ReadPreference // nil means primary
	Session        *Session
}

// RunCursorCommandOptions are the options of RunCursorCommand. BatchSize,
// MaxAwaitTime and Comment apply to the cursor's getMores (the command
// carries its own).
type RunCursorCommandOptions struct {
	ReadPreference *ReadPreference // nil means primary
	Session        *Session
	BatchSize      int32
	MaxAwaitTime   time.Duration // getMore's maxTimeMS (capped by the time left under timeoutMS)
	Comment        any
	TimeoutMode    TimeoutMode // see FindOptions.TimeoutMode
	// CursorType says how the cursor the command opens behaves (the
	// command carries its own tailable and awaitData): a tailable one's
	// Next waits for documents, under timeoutMS with a fresh timeoutMS per
	// Next, and only an awaitData one's command carries maxTimeMS.
	CursorType CursorType
}

// ListOptions are the options of ListIndexes.
type ListOptions struct {
	Comment     any
	Session     *Session
	TimeoutMode TimeoutMode // see FindOptions.TimeoutMode
}
