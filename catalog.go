package sturdy

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/sturdy-go/sturdy/internal/exec"
)

// ListDatabasesOptions are the options of ListDatabases and
// ListDatabaseNames.
type ListDatabasesOptions struct {
	// NameOnly asks the server for names only, without sizes, which needs
	// no lock. Default nil: not sent (sizes included). ListDatabaseNames
	// always sends true.
	NameOnly *bool
	// AuthorizedDatabases, with access control on, lists only the
	// databases the user has privileges on. Default nil: not sent (the
	// server decides).
	AuthorizedDatabases *bool
	Comment             any
	Session             *Session
}

// DatabaseSpecification is one database of a ListDatabases result.
type DatabaseSpecification struct {
	Name       string `bson:"name"`
	SizeOnDisk int64  `bson:"sizeOnDisk"`
	Empty      bool   `bson:"empty"`
}

// ListDatabasesResult is the result of ListDatabases.
type ListDatabasesResult struct {
	Databases []DatabaseSpecification
	// TotalSize is the sum of the databases' sizes; 0 with NameOnly.
	TotalSize int64
	// Raw is the server's reply, for fields not decoded here (e.g. the
	// per-shard sizes a mongos reports).
	Raw bson.Raw
}

// ListDatabases lists the databases matching filter (nil: all), which may
// test name, sizeOnDisk and empty.
func (c *Client) ListDatabases(ctx context.Context, filter any, optList ...*ListDatabasesOptions) (ListDatabasesResult, error) {
	ctx, cancel := c.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &ListDatabasesOptions{}
	}
	reply, err := c.listDatabases(ctx, filter, opts.NameOnly, opts)
	if err != nil {
		return ListDatabasesResult{}, err
	}
	var out struct {
		Databases []DatabaseSpecification `bson:"databases"`
	}
	if err := bson.Unmarshal(reply, &out); err != nil {
		return ListDatabasesResult{}, fmt.Errorf("sturdy: decoding listDatabases reply: %w", err)
	}
	return ListDatabasesResult{Databases: out.Databases, TotalSize: int64Of(reply, "totalSize"), Raw: reply}, nil
}

// ListDatabaseNames returns the names of the databases matching filter (nil:
// all). It sends nameOnly: true; opts.NameOnly is ignored.
func (c *Client) ListDatabaseNames(ctx context.Context, filter any, optList ...*ListDatabasesOptions) ([]string, error) {
	ctx, cancel := c.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &ListDatabasesOptions{}
	}
	nameOnly := true
	reply, err := c.listDatabases(ctx, filter, &nameOnly, opts)
	if err != nil {
		return nil, err
	}
	var out struct {
		Databases []struct {
			Name string `bson:"name"`
		} `bson:"databases"`
	}
	if err := bson.Unmarshal(reply, &out); err != nil {
		return nil, fmt.Errorf("sturdy: decoding listDatabases reply: %w", err)
	}
	names := make([]string, len(out.Databases))
	for i, d := range out.Databases {
		names[i] = d.Name
	}
	return names, nil
}

// listDatabases runs the listDatabases command on the primary of the admin
// database (a retryable read).
func (c *Client) listDatabases(ctx context.Context, filter any, nameOnly *bool, opts *ListDatabasesOptions) (bson.Raw, error) {
	f, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	cmd := cmdBuilder{{Key: "listDatabases", Value: int32(1)}}
	if len(f) > len(emptyDoc) {
		cmd.add("filter", f)
	}
	cmd.addBoolPtr("nameOnly", nameOnly)
	cmd.addBoolPtr("authorizedDatabases", opts.AuthorizedDatabases)
	cmd.addIf("comment", opts.Comment)
	res, err := c.execute(ctx, &exec.Operation{Name: "listDatabases", DB: "admin", Command: bson.D(cmd), Flags: exec.RetryableRead}, opts.Session)
	if err != nil {
		return nil, err
	}
	return res.Reply, nil
}

// ListCollectionsOptions are the options of ListCollections,
// ListCollectionSpecifications and ListCollectionNames.
type ListCollectionsOptions struct {
	// NameOnly asks for names and types only, which needs no collection
	// lock. Default nil: not sent. ListCollectionNames always sends true.
	NameOnly *bool
	// AuthorizedCollections, with access control on and NameOnly, lists
	// only the collections the user has privileges on. Default nil: not
	// sent.
	AuthorizedCollections *bool
	// BatchSize is the number of specifications per batch. Default 0: the
	// server's.
	BatchSize   int32
	Comment     any
	Session     *Session
	TimeoutMode TimeoutMode // see FindOptions.TimeoutMode
}

// CollectionSpecification is one collection (or view) of
// ListCollectionSpecifications.
type CollectionSpecification struct {
	Name     string // the collection's name
	Type     string // "collection", "view" or "timeseries"
	ReadOnly bool   // info.readOnly: true for views
	// UUID is info.uuid; nil for views.
	UUID *bson.Binary
	// Options are the creation options (validator, capped, viewOn...);
	// IDIndex is the _id index's specification (nil for views). Raw is the
	// whole specification as the server sent it.
	Options, IDIndex, Raw bson.Raw
}

// ListCollections returns a cursor over the specifications of the
// collections and views matching filter (nil: all), which may test name,
// type, options and info.
func (db *Database) ListCollections(ctx context.Context, filter any, optList ...*ListCollectionsOptions) (*Cursor, error) {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &ListCollectionsOptions{}
	}
	return db.listCollections(ctx, filter, opts.NameOnly, opts)
}

// ListCollectionSpecifications returns the decoded specifications of the
// collections and views matching filter (nil: all).
func (db *Database) ListCollectionSpecifications(ctx context.Context, filter any, optList ...*ListCollectionsOptions) ([]CollectionSpecification, error) {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	cur, err := db.ListCollections(ctx, filter, optList...)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	specs := []CollectionSpecification{}
	for cur.Next(ctx) {
		spec, err := collectionSpecification(cur.Current)
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	return specs, cur.Err()
}

// collectionSpecification decodes one listCollections document, copying it
// out of the cursor's batch.
func collectionSpecification(doc bson.Raw) (CollectionSpecification, error) {
	raw := append(bson.Raw(nil), doc...)
	spec := CollectionSpecification{Raw: raw}
	var ok bool
	if spec.Name, ok = raw.Lookup("name").StringValueOK(); !ok {
		return spec, fmt.Errorf("sturdy: listCollections returned a specification without a name: %v", raw)
	}
	spec.Type, _ = raw.Lookup("type").StringValueOK()
	spec.Options, _ = raw.Lookup("options").DocumentOK()
	spec.IDIndex, _ = raw.Lookup("idIndex").DocumentOK()
	if info, ok := raw.Lookup("info").DocumentOK(); ok {
		spec.ReadOnly, _ = info.Lookup("readOnly").BooleanOK()
		if sub, data, ok := info.Lookup("uuid").BinaryOK(); ok {
			spec.UUID = &bson.Binary{Subtype: sub, Data: data}
		}
	}
	return spec, nil
}

// ListCollectionNames returns the names of the collections and views
// matching filter (nil: all). It sends nameOnly: true; opts.NameOnly is
// ignored.
func (db *Database) ListCollectionNames(ctx context.Context, filter any, optList ...*ListCollectionsOptions) ([]string, error) {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &ListCollectionsOptions{}
	}
	nameOnly := true
	cur, err := db.listCollections(ctx, filter, &nameOnly, opts)
	if err != nil {
		return nil, err
	}
	defer cur.Close(context.WithoutCancel(ctx))
	names := []string{}
	for cur.Next(ctx) {
		if s, ok := cur.Current.Lookup("name").StringValueOK(); ok {
			names = append(names, s)
		}
	}
	return names, cur.Err()
}

// listCollections opens a listCollections cursor on the primary (a
// retryable read).
func (db *Database) listCollections(ctx context.Context, filter any, nameOnly *bool, opts *ListCollectionsOptions) (*Cursor, error) {
	f, err := toDoc(filter, true)
	if err != nil {
		return nil, err
	}
	if opts.BatchSize < 0 {
		return nil, argError("negative batch size %d", opts.BatchSize)
	}
	cmd := cmdBuilder{{Key: "listCollections", Value: int32(1)}, {Key: "filter", Value: f}}
	cmd.addBoolPtr("nameOnly", nameOnly)
	cmd.addBoolPtr("authorizedCollections", opts.AuthorizedCollections)
	if opts.BatchSize > 0 {
		cmd.add("cursor", bson.D{{Key: "batchSize", Value: opts.BatchSize}})
	}
	cmd.addIf("comment", opts.Comment)
	op := &exec.Operation{Name: "listCollections", DB: db.name, Command: bson.D(cmd), Flags: exec.RetryableRead}
	return openCursor(ctx, db.client, op, cursorSpec{session: opts.Session, batchSize: opts.BatchSize, comment: opts.Comment, mode: opts.TimeoutMode})
}

// CreateCollectionOptions are the options of CreateCollection. Nil and zero
// fields are not sent.
type CreateCollectionOptions struct {
	// Capped, with SizeInBytes (required) and MaxDocuments, makes a
	// fixed-size collection.
	Capped       *bool
	SizeInBytes  *int64
	MaxDocuments *int64
	// Validator is a query document new and updated documents must match;
	// ValidationLevel ("off", "strict", "moderate") and ValidationAction
	// ("error", "warn") say how it applies.
	Validator        any
	ValidationLevel  string
	ValidationAction string
	// ViewOn and Pipeline create a read-only view of ViewOn, a collection
	// of the same database, through the aggregation Pipeline.
	ViewOn   string
	Pipeline any
	// Collation is the default collation of the collection.
	Collation *Collation
	// ExpireAfterSeconds removes documents of a time series or clustered
	// collection older than this.
	ExpireAfterSeconds *int64
	// TimeSeries ({timeField, metaField, granularity}), ClusteredIndex,
	// ChangeStreamPreAndPostImages, IndexOptionDefaults and StorageEngine
	// are passed as given (documents).
	TimeSeries                   any
	ClusteredIndex               any
	ChangeStreamPreAndPostImages any
	IndexOptionDefaults          any
	StorageEngine                any
	Comment                      any
	Session                      *Session
}

// CreateCollection creates a collection (or, with ViewOn, a view) with the
// database's write concern. Server errors, such as NamespaceExists (48)
// for a namespace that exists with other options, come back as a
// *CommandError.
func (db *Database) CreateCollection(ctx context.Context, name string, optList ...*CreateCollectionOptions) error {
	ctx, cancel := db.begin(ctx)
	defer cancel()
	opts := lastOptions(optList)
	if opts == nil {
		opts = &CreateCollectionOptions{}
	}
	if name == "" {
		return argError("CreateCollection needs a collection name")
	}
	cmd := cmdBuilder{{Key: "create", Value: name}}
	cmd.addBoolPtr("capped", opts.Capped)
	if opts.SizeInBytes != nil {
		cmd.add("size", *opts.SizeInBytes)
	}
	if opts.MaxDocuments != nil {
		cmd.add("max", *opts.MaxDocuments)
	}
	if opts.ViewOn != "" {
		cmd.add("viewOn", opts.ViewOn)
	}
	if opts.Pipeline != nil {
		pv, err := pipelineValue(opts.Pipeline)
		if err != nil {
			return err
		}
		cmd.add("pipeline", pv)
	}
	for _, field := range []struct {
		key string
		v   any
	}{
		{"validator", opts.Validator}, {"timeseries", opts.TimeSeries}, {"clusteredIndex", opts.ClusteredIndex},
		{"changeStreamPreAndPostImages", opts.ChangeStreamPreAndPostImages},
		{"indexOptionDefaults", opts.IndexOptionDefaults}, {"storageEngine", opts.StorageEngine},
	} {
		d, err := docOrNil(field.v)
		if err != nil {
			return fmt.Errorf("%s: %w", field.key, err)
		}
		cmd.addIf(field.key, d)
	}
	if opts.ValidationLevel != "" {
		cmd.add("validationLevel", opts.ValidationLevel)
	}
	if opts.ValidationAction != "" {
		cmd.add("validationAction", opts.ValidationAction)
	}
	cmd.addCollation(opts.Collation)
	if opts.ExpireAfterSeconds != nil {
		cmd.add("expireAfterSeconds", *opts.ExpireAfterSeconds)
	}
	cmd.addIf("writeConcern", writeConcernDoc(db.wc))
	cmd.addIf("comment", opts.Comment)
	_, err := db.client.execute(ctx, &exec.Operation{Name: "create", DB: db.name, Command: bson.D(cmd), Flags: exec.Write}, opts.Session)
	return err
}
