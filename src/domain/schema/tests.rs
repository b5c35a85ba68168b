use super::*;

/// Converts a schema given as JSON text.
fn params(json: &str) -> Vec<Param> {
    let value: Value = serde_json::from_str(json).expect("test schema is JSON");
    params_from_schema(value.as_object().expect("test schema is an object"))
}

/// The param called `name`.
fn get<'p>(params: &'p [Param], name: &str) -> &'p Param {
    params
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no param {name} in {params:?}"))
}

/// A compact picture of a param's structure: `name:type`, `!` when required, `(enum)`,
/// `=default`, `[items]` and `{properties}`.
fn shape(p: &Param) -> String {
    let mut s = format!("{}:{}", p.name, p.r#type);
    if p.required {
        s.push('!');
    }
    if !p.enum_values.is_empty() {
        s += &format!("({})", p.enum_values.join(","));
    }
    if !p.default_json.is_empty() {
        s += &format!("={}", p.default_json);
    }
    if let Some(items) = &p.items {
        s += &format!("[{}]", shape(items));
    }
    if !p.properties.is_empty() {
        s += &format!("{{{}}}", shapes(&p.properties).join(" "));
    }
    s
}

fn shapes(params: &[Param]) -> Vec<String> {
    params.iter().map(shape).collect()
}

/// How many params there are in `params`, nested ones included.
fn count(params: &[Param]) -> usize {
    params
        .iter()
        .map(|p| {
            1 + count(&p.properties)
                + p.items
                    .as_deref()
                    .map_or(0, |i| count(std::slice::from_ref(i)))
        })
        .sum()
}

// Real schemas, as the servers sent them in tools/list (captured over stdio).

/// `echo`'s `inputSchema` from `@modelcontextprotocol/server-everything` 2026.8.31.
const EVERYTHING_ECHO: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {"message": {"type": "string", "description": "Message to echo"}},
  "required": ["message"]
}"##;

/// `get-annotated-message`'s `inputSchema` from `@modelcontextprotocol/server-everything` 2026.8.31.
const EVERYTHING_GET_ANNOTATED_MESSAGE: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "messageType": {
      "type": "string",
      "enum": ["error", "success", "debug"],
      "description": "Type of message to demonstrate different annotation patterns"
    },
    "includeImage": {
      "default": false,
      "description": "Whether to include an example image",
      "type": "boolean"
    }
  },
  "required": ["messageType"]
}"##;

/// `get-env`'s `inputSchema` from `@modelcontextprotocol/server-everything` 2026.8.31.
const EVERYTHING_GET_ENV: &str = r##"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}}"##;

/// `get-resource-reference`'s `inputSchema` from `@modelcontextprotocol/server-everything` 2026.8.31.
const EVERYTHING_GET_RESOURCE_REFERENCE: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "resourceType": {"default": "Text", "type": "string", "enum": ["Text", "Blob"]},
    "resourceId": {"default": 1, "description": "ID of the text resource to fetch", "type": "number"}
  }
}"##;

/// `get-sum`'s `inputSchema` from `@modelcontextprotocol/server-everything` 2026.8.31.
const EVERYTHING_GET_SUM: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "a": {"type": "number", "description": "First number"},
    "b": {"type": "number", "description": "Second number"}
  },
  "required": ["a", "b"]
}"##;

/// `gzip-file-as-resource`'s `inputSchema` from `@modelcontextprotocol/server-everything` 2026.8.31.
const EVERYTHING_GZIP_FILE_AS_RESOURCE: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "name": {"default": "README.md.gz", "type": "string", "description": "Name of the output file"},
    "data": {
      "default": "https://raw.githubusercontent.com/modelcontextprotocol/servers/refs/heads/main/README.md",
      "type": "string",
      "format": "uri",
      "description": "URL or data URI of the file content to compress"
    },
    "outputType": {
      "default": "resourceLink",
      "description": "How the resulting gzipped file should be returned. 'resourceLink' returns a link to a resource that can be read later, 'resource' returns a full resource object.",
      "type": "string",
      "enum": ["resourceLink", "resource"]
    }
  }
}"##;

/// `read_multiple_files`'s `inputSchema` from `@modelcontextprotocol/server-filesystem` 2026.8.31.
const FILESYSTEM_READ_MULTIPLE_FILES: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "paths": {
      "minItems": 1,
      "type": "array",
      "items": {"type": "string"},
      "description": "Array of file paths to read. Each path must be a string pointing to a valid file within allowed directories."
    }
  },
  "required": ["paths"]
}"##;

/// `edit_file`'s `inputSchema` from `@modelcontextprotocol/server-filesystem` 2026.8.31.
const FILESYSTEM_EDIT_FILE: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "edits": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "oldText": {"type": "string", "description": "Text to search for - must match exactly"},
          "newText": {"type": "string", "description": "Text to replace with"}
        },
        "required": ["oldText", "newText"]
      }
    },
    "dryRun": {
      "default": false,
      "description": "Preview changes using git-style diff format",
      "type": "boolean"
    }
  },
  "required": ["path", "edits"]
}"##;

/// `directory_tree`'s `inputSchema` from `@modelcontextprotocol/server-filesystem` 2026.8.31.
const FILESYSTEM_DIRECTORY_TREE: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "excludePatterns": {"default": [], "type": "array", "items": {"type": "string"}}
  },
  "required": ["path"]
}"##;

/// `create_entities`'s `inputSchema` from `@modelcontextprotocol/server-memory` 2026.8.31.
const MEMORY_CREATE_ENTITIES: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "entities": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "name": {"type": "string", "description": "The name of the entity"},
          "entityType": {"type": "string", "description": "The type of the entity"},
          "observations": {"type": "array", "items": {"type": "string"}, "description": "An array of observation contents associated with the entity"}
        },
        "required": ["name", "entityType", "observations"]
      }
    }
  },
  "required": ["entities"]
}"##;

/// `delete_relations`'s `inputSchema` from `@modelcontextprotocol/server-memory` 2026.8.31.
const MEMORY_DELETE_RELATIONS: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "properties": {
    "relations": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "from": {"type": "string", "description": "The name of the entity where the relation starts"},
          "to": {"type": "string", "description": "The name of the entity where the relation ends"},
          "relationType": {"type": "string", "description": "The type of the relation"}
        },
        "required": ["from", "to", "relationType"]
      },
      "description": "An array of relations to delete"
    }
  },
  "required": ["relations"]
}"##;

// The Python server behind the PYDANTIC_* schemas (mcp 2.3.0, `MCPServer`, stdio):
//   class Priority(str, Enum): low, medium, high
//   class Address(BaseModel): street: str; city: str = Field(description="City name");
//                             zip: Optional[str] = None          (doc: "A postal address.")
//   class Person(BaseModel): name: str = Field(description="Full name");
//       age: Optional[int] = Field(default=None, description="Age in years");
//       address: Address; previous: Optional[Address] = None; tags: list[str] = []
//   class Node(BaseModel): label: str; children: list[Node] = []  (doc: "A tree node.")
//   class Email(BaseModel): address: str = Field(description="E-mail address"); verified: bool = False
//   class Phone(BaseModel): number: str; verified: bool = False
//   add_person(person: Person, priority: Priority = Priority.medium, mode: Literal["fast", "slow"] = "fast")
//   add_people(people: list[Person], note: Optional[str] = None)
//   walk_tree(root: Node, max_depth: int = 3)
//   notify(contact: Email | Phone, home: Address = Field(description="Where to send mail"))
//   search(query: str, limit: Optional[int] = 10,
//          kinds: Optional[list[Literal["file", "dir"]]] = None, exact: bool = False)

/// `add_person`'s `inputSchema` from a Python `mcp` 2.3.0 `MCPServer` (pydantic 2.14.4).
const PYDANTIC_ADD_PERSON: &str = r##"{
  "properties": {
    "person": {"$ref": "#/$defs/Person"},
    "priority": {"$ref": "#/$defs/Priority", "default": "medium"},
    "mode": {"default": "fast", "enum": ["fast", "slow"], "title": "Mode", "type": "string"}
  },
  "required": ["person"],
  "type": "object",
  "$defs": {
    "Address": {
      "description": "A postal address.",
      "properties": {
        "street": {"title": "Street", "type": "string"},
        "city": {"description": "City name", "title": "City", "type": "string"},
        "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Zip"}
      },
      "required": ["street", "city"],
      "title": "Address",
      "type": "object"
    },
    "Person": {
      "properties": {
        "name": {"description": "Full name", "title": "Name", "type": "string"},
        "age": {
          "anyOf": [{"type": "integer"}, {"type": "null"}],
          "default": null,
          "description": "Age in years",
          "title": "Age"
        },
        "address": {"$ref": "#/$defs/Address"},
        "previous": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": null},
        "tags": {"default": [], "items": {"type": "string"}, "title": "Tags", "type": "array"}
      },
      "required": ["name", "address"],
      "title": "Person",
      "type": "object"
    },
    "Priority": {"enum": ["low", "medium", "high"], "title": "Priority", "type": "string"}
  },
  "title": "add_personArguments"
}"##;

/// `add_people`'s `inputSchema` from a Python `mcp` 2.3.0 `MCPServer` (pydantic 2.14.4).
const PYDANTIC_ADD_PEOPLE: &str = r##"{
  "properties": {
    "people": {"items": {"$ref": "#/$defs/Person"}, "title": "People", "type": "array"},
    "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Note"}
  },
  "required": ["people"],
  "type": "object",
  "$defs": {
    "Address": {
      "description": "A postal address.",
      "properties": {
        "street": {"title": "Street", "type": "string"},
        "city": {"description": "City name", "title": "City", "type": "string"},
        "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Zip"}
      },
      "required": ["street", "city"],
      "title": "Address",
      "type": "object"
    },
    "Person": {
      "properties": {
        "name": {"description": "Full name", "title": "Name", "type": "string"},
        "age": {
          "anyOf": [{"type": "integer"}, {"type": "null"}],
          "default": null,
          "description": "Age in years",
          "title": "Age"
        },
        "address": {"$ref": "#/$defs/Address"},
        "previous": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": null},
        "tags": {"default": [], "items": {"type": "string"}, "title": "Tags", "type": "array"}
      },
      "required": ["name", "address"],
      "title": "Person",
      "type": "object"
    }
  },
  "title": "add_peopleArguments"
}"##;

/// `walk_tree`'s `inputSchema` from a Python `mcp` 2.3.0 `MCPServer` (pydantic 2.14.4).
const PYDANTIC_WALK_TREE: &str = r##"{
  "properties": {
    "root": {"$ref": "#/$defs/Node"},
    "max_depth": {"default": 3, "title": "Max Depth", "type": "integer"}
  },
  "required": ["root"],
  "type": "object",
  "$defs": {
    "Node": {
      "description": "A tree node.",
      "properties": {
        "label": {"title": "Label", "type": "string"},
        "children": {
          "default": [],
          "items": {"$ref": "#/$defs/Node"},
          "title": "Children",
          "type": "array"
        }
      },
      "required": ["label"],
      "title": "Node",
      "type": "object"
    }
  },
  "title": "walk_treeArguments"
}"##;

/// `notify`'s `inputSchema` from a Python `mcp` 2.3.0 `MCPServer` (pydantic 2.14.4).
const PYDANTIC_NOTIFY: &str = r##"{
  "properties": {
    "contact": {"anyOf": [{"$ref": "#/$defs/Email"}, {"$ref": "#/$defs/Phone"}], "title": "Contact"},
    "home": {"$ref": "#/$defs/Address", "description": "Where to send mail"}
  },
  "required": ["contact", "home"],
  "type": "object",
  "$defs": {
    "Address": {
      "description": "A postal address.",
      "properties": {
        "street": {"title": "Street", "type": "string"},
        "city": {"description": "City name", "title": "City", "type": "string"},
        "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Zip"}
      },
      "required": ["street", "city"],
      "title": "Address",
      "type": "object"
    },
    "Email": {
      "properties": {
        "address": {"description": "E-mail address", "title": "Address", "type": "string"},
        "verified": {"default": false, "title": "Verified", "type": "boolean"}
      },
      "required": ["address"],
      "title": "Email",
      "type": "object"
    },
    "Phone": {
      "properties": {
        "number": {"title": "Number", "type": "string"},
        "verified": {"default": false, "title": "Verified", "type": "boolean"}
      },
      "required": ["number"],
      "title": "Phone",
      "type": "object"
    }
  },
  "title": "notifyArguments"
}"##;

/// `search`'s `inputSchema` from a Python `mcp` 2.3.0 `MCPServer` (pydantic 2.14.4).
const PYDANTIC_SEARCH: &str = r##"{
  "properties": {
    "query": {"title": "Query", "type": "string"},
    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 10, "title": "Limit"},
    "kinds": {
      "anyOf": [
        {"items": {"enum": ["file", "dir"], "type": "string"}, "type": "array"},
        {"type": "null"}
      ],
      "default": null,
      "title": "Kinds"
    },
    "exact": {"default": false, "title": "Exact", "type": "boolean"}
  },
  "required": ["query"],
  "type": "object",
  "title": "searchArguments"
}"##;

// Tests on the real schemas.

#[test]
fn real_flat_schemas_keep_types_required_enums_and_defaults() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("everything echo", EVERYTHING_ECHO, &["message:string!"]),
        (
            "everything get-annotated-message",
            EVERYTHING_GET_ANNOTATED_MESSAGE,
            &[
                "messageType:string!(error,success,debug)",
                "includeImage:boolean=false",
            ],
        ),
        ("everything get-env", EVERYTHING_GET_ENV, &[]),
        (
            "everything get-resource-reference",
            EVERYTHING_GET_RESOURCE_REFERENCE,
            &[
                r#"resourceType:string(Text,Blob)="Text""#,
                "resourceId:number=1",
            ],
        ),
        (
            "everything get-sum",
            EVERYTHING_GET_SUM,
            &["a:number!", "b:number!"],
        ),
        (
            "everything gzip-file-as-resource",
            EVERYTHING_GZIP_FILE_AS_RESOURCE,
            &[
                r#"name:string="README.md.gz""#,
                r#"data:string="https://raw.githubusercontent.com/modelcontextprotocol/servers/refs/heads/main/README.md""#,
                r#"outputType:string(resourceLink,resource)="resourceLink""#,
            ],
        ),
        (
            "filesystem read_multiple_files",
            FILESYSTEM_READ_MULTIPLE_FILES,
            &["paths:array![:string]"],
        ),
        (
            "filesystem directory_tree",
            FILESYSTEM_DIRECTORY_TREE,
            &["path:string!", "excludePatterns:array=[][:string]"],
        ),
        (
            "pydantic search",
            PYDANTIC_SEARCH,
            &[
                "query:string!",
                "limit:integer|null=10",
                "kinds:array|null=null[:string(file,dir)]",
                "exact:boolean=false",
            ],
        ),
    ];
    for (what, schema, expected) in cases {
        assert_eq!(shapes(&params(schema)), *expected, "{what}");
    }
}

#[test]
fn descriptions_are_kept_and_fall_back_to_titles() {
    let cases: &[(&str, &str, &str)] = &[
        (EVERYTHING_ECHO, "message", "Message to echo"),
        (EVERYTHING_GET_SUM, "b", "Second number"),
        (
            FILESYSTEM_READ_MULTIPLE_FILES,
            "paths",
            "Array of file paths to read. Each path must be a string pointing to a valid \
             file within allowed directories.",
        ),
        (
            MEMORY_DELETE_RELATIONS,
            "relations",
            "An array of relations to delete",
        ),
        (FILESYSTEM_EDIT_FILE, "path", ""),
        // pydantic: the title when there is no description.
        (PYDANTIC_SEARCH, "query", "Query"),
        (PYDANTIC_WALK_TREE, "max_depth", "Max Depth"),
        (PYDANTIC_ADD_PERSON, "mode", "Mode"),
    ];
    for (schema, name, description) in cases {
        assert_eq!(
            get(&params(schema), name).description,
            *description,
            "{name}"
        );
    }
}

#[test]
fn arrays_of_objects_have_item_properties() {
    let edit = params(FILESYSTEM_EDIT_FILE);
    assert_eq!(
        shapes(&edit),
        [
            "path:string!",
            "edits:array![:object{oldText:string! newText:string!}]",
            "dryRun:boolean=false",
        ]
    );
    let items = get(&edit, "edits")
        .items
        .as_deref()
        .expect("edits has items");
    assert_eq!(items.name, "");
    assert_eq!(
        get(&items.properties, "oldText").description,
        "Text to search for - must match exactly"
    );

    let relations = params(MEMORY_DELETE_RELATIONS);
    assert_eq!(
        shapes(&relations),
        ["relations:array![:object{from:string! to:string! relationType:string!}]"]
    );
}

#[test]
fn nested_arrays_inside_array_items_are_converted() {
    let entities = params(MEMORY_CREATE_ENTITIES);
    assert_eq!(
        shapes(&entities),
        ["entities:array![:object{name:string! entityType:string! \
             observations:array![:string]}]"]
    );
    let entity = get(&entities, "entities").items.as_deref().expect("items");
    let observations = get(&entity.properties, "observations");
    assert_eq!(
        observations.description,
        "An array of observation contents associated with the entity"
    );
    assert_eq!(
        observations.items.as_deref().map(|i| i.r#type.as_str()),
        Some("string")
    );
}

/// Person as pydantic defines it, resolved through `$defs`.
const PERSON: &str = "object{name:string! age:integer|null=null \
     address:object!{street:string! city:string! zip:string|null=null} \
     previous:object|null=null{street:string! city:string! zip:string|null=null} \
     tags:array=[][:string]}";

#[test]
fn refs_to_defs_resolve_nested_models() {
    let person = params(PYDANTIC_ADD_PERSON);
    assert_eq!(
        shapes(&person),
        [
            format!("person:{}", PERSON.replacen("object", "object!", 1)),
            r#"priority:string(low,medium,high)="medium""#.to_owned(),
            r#"mode:string(fast,slow)="fast""#.to_owned(),
        ]
    );
    let model = get(&person, "person");
    // No description on the model: its title stands in.
    assert_eq!(model.description, "Person");
    assert_eq!(get(&model.properties, "name").description, "Full name");
    assert_eq!(
        get(&model.properties, "address").description,
        "A postal address."
    );
    let address = get(&model.properties, "address");
    assert_eq!(get(&address.properties, "city").description, "City name");
    assert_eq!(get(&address.properties, "zip").description, "Zip");
}

#[test]
fn ref_siblings_add_defaults_to_the_referenced_enum() {
    let priority = get(&params(PYDANTIC_ADD_PERSON), "priority").clone();
    assert_eq!(priority.r#type, "string");
    assert_eq!(priority.enum_values, ["low", "medium", "high"]);
    assert_eq!(priority.default_json, r#""medium""#);
    assert_eq!(priority.description, "Priority");
    assert!(!priority.required);
}

#[test]
fn nullable_anyof_becomes_type_or_null() {
    let person = params(PYDANTIC_ADD_PERSON);
    let model = &get(&person, "person").properties;
    let people = params(PYDANTIC_ADD_PEOPLE);
    let search = params(PYDANTIC_SEARCH);
    let cases: &[(&Param, &str, &str)] = &[
        (get(model, "age"), "age:integer|null=null", "Age in years"),
        (
            get(model, "previous"),
            "previous:object|null=null{street:string! city:string! zip:string|null=null}",
            // The inner (referenced) param's description is kept.
            "A postal address.",
        ),
        (get(&people, "note"), "note:string|null=null", "Note"),
        (get(&search, "limit"), "limit:integer|null=10", "Limit"),
        (
            get(&search, "kinds"),
            "kinds:array|null=null[:string(file,dir)]",
            "Kinds",
        ),
    ];
    for (param, expected, description) in cases {
        assert_eq!(shape(param), *expected);
        assert_eq!(param.description, *description, "{expected}");
    }
}

#[test]
fn list_of_models_resolves_the_item_ref() {
    assert_eq!(
        shapes(&params(PYDANTIC_ADD_PEOPLE)),
        [
            format!("people:array![:{PERSON}]"),
            "note:string|null=null".to_owned()
        ]
    );
}

#[test]
fn self_referencing_model_stops_at_the_revisit() {
    let tree = params(PYDANTIC_WALK_TREE);
    assert_eq!(
        shapes(&tree),
        [
            "root:object!{label:string! children:array=[][:object]}",
            "max_depth:integer=3"
        ]
    );
    let root = get(&tree, "root");
    assert_eq!(root.description, "A tree node.");
    let child = get(&root.properties, "children")
        .items
        .as_deref()
        .expect("items");
    // The revisited definition keeps its declared type and description, nothing nested.
    assert_eq!(child.r#type, "object");
    assert_eq!(child.description, "A tree node.");
    assert!(child.properties.is_empty() && child.items.is_none());
}

#[test]
fn anyof_of_objects_merges_properties_requiring_only_common_ones() {
    let notify = params(PYDANTIC_NOTIFY);
    let contact = get(&notify, "contact");
    // Email requires `address`, Phone requires `number`: neither is required of the union.
    assert_eq!(
        shape(contact),
        "contact:object!{address:string verified:boolean=false number:string}"
    );
    assert_eq!(contact.description, "Contact");
    assert_eq!(
        get(&contact.properties, "address").description,
        "E-mail address"
    );
}

#[test]
fn ref_sibling_description_overrides_the_referenced_one() {
    let home = get(&params(PYDANTIC_NOTIFY), "home").clone();
    assert_eq!(
        shape(&home),
        "home:object!{street:string! city:string! zip:string|null=null}"
    );
    assert_eq!(home.description, "Where to send mail");
}

// Tests on rules and edge cases, with small schemas written for them.

/// The one property `p` of an object schema, with a few definitions to refer to.
fn property(schema: &str) -> Param {
    let root = format!(
        r##"{{"type": "object", "properties": {{"p": {schema}}}, "$defs": {{
            "Color": {{"title": "Color", "enum": ["red", "green"], "type": "string"}},
            "Str": {{"type": "string"}}}}}}"##
    );
    let mut all = params(&root);
    assert_eq!(all.len(), 1, "{schema}");
    all.remove(0)
}

#[test]
fn type_forms_and_inference() {
    let cases = [
        (r#"{"type": "string"}"#, "p:string"),
        (r#"{"type": ["string", "null"]}"#, "p:string|null"),
        (
            r#"{"type": ["integer", "integer", "null"]}"#,
            "p:integer|null",
        ),
        (r#"{"type": "string", "nullable": true}"#, "p:string|null"),
        (
            r#"{"type": ["string", "null"], "nullable": true}"#,
            "p:string|null",
        ),
        (r#"{"nullable": true}"#, "p:"),
        (r#"{"nullable": "yes", "type": "string"}"#, "p:string"),
        (
            r#"{"properties": {"a": {"type": "integer"}}, "required": ["a"]}"#,
            "p:object{a:integer!}",
        ),
        (r#"{"items": {"type": "string"}}"#, "p:array[:string]"),
        (r#"{"enum": ["a", "b"]}"#, "p:string(a,b)"),
        (r#"{"enum": [1, 2]}"#, "p:integer(1,2)"),
        (
            r#"{"enum": ["a", 1, true, null, 1.5]}"#,
            "p:string|integer|boolean|null|number(a,1,true,null,1.5)",
        ),
        (r#"{"const": "fixed"}"#, "p:string(fixed)"),
        (r#"{"type": "integer", "const": 7}"#, "p:integer(7)"),
        (r#"{"type": "string", "format": "uri"}"#, "p:string"),
    ];
    for (schema, expected) in cases {
        assert_eq!(shape(&property(schema)), expected, "{schema}");
    }
}

#[test]
fn defaults_are_compact_json_text() {
    let cases = [
        (
            r#"{"type": "object", "default": {"a": [1, 2], "b": "x y"}}"#,
            r#"{"a":[1,2],"b":"x y"}"#,
        ),
        (r#"{"type": "string", "default": "hi"}"#, r#""hi""#),
        (r#"{"type": "string", "default": null}"#, "null"),
        (r#"{"type": "number", "default": 0.5}"#, "0.5"),
        (r#"{"type": "boolean", "default": true}"#, "true"),
        (r#"{"type": "string"}"#, ""),
    ];
    for (schema, expected) in cases {
        assert_eq!(property(schema).default_json, expected, "{schema}");
    }
}

#[test]
fn tuple_items_become_a_union_of_their_members() {
    let cases = [
        (
            r#"{"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}"#,
            "p:array[:string|integer]",
        ),
        (
            r#"{"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                "items": false}"#,
            "p:array[:number]",
        ),
        (
            r#"{"prefixItems": [{"type": "string"}], "items": {"type": "boolean"}}"#,
            "p:array[:string|boolean]",
        ),
        (r#"{"type": "array", "items": true}"#, "p:array[:]"),
        (r#"{"type": "array", "items": false}"#, "p:array"),
    ];
    for (schema, expected) in cases {
        assert_eq!(shape(&property(schema)), expected, "{schema}");
    }
}

#[test]
fn unions_join_types_and_concatenate_enums() {
    let cases = [
        (
            r#"{"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "string"}]}"#,
            "p:string|integer",
        ),
        (
            r#"{"anyOf": [{"const": "a"}, {"const": "b"}, {"enum": ["b", "c"]}]}"#,
            "p:string(a,b,c)",
        ),
        (
            r##"{"oneOf": [{"$ref": "#/$defs/Color"}, {"enum": ["blue"], "type": "string"}]}"##,
            "p:string(red,green,blue)",
        ),
        // Any string is allowed, so the enum restricts nothing.
        (
            r#"{"anyOf": [{"enum": ["a"]}, {"type": "string"}]}"#,
            "p:string",
        ),
        // An unconstrained member makes the union unconstrained.
        (r#"{"anyOf": [{"type": "string"}, {}]}"#, "p:"),
        (r#"{"anyOf": [{"type": "string"}, true]}"#, "p:"),
        (r#"{"anyOf": [{"type": "null"}]}"#, "p:null"),
        (
            r#"{"anyOf": [{"enum": ["x", "y"], "type": "string"}, {"type": "null"}]}"#,
            "p:string|null(x,y)",
        ),
        (
            r#"{"anyOf": [{"type": "array", "items": {"type": "string"}},
                          {"type": "array", "items": {"type": "integer"}}]}"#,
            "p:array[:string|integer]",
        ),
        (
            r#"{"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                           "required": ["a"]}, {"type": "string"}]}"#,
            "p:object|string{a:string}",
        ),
        (
            r#"{"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                           "required": ["a"]},
                          {"type": "object", "properties": {"a": {"type": "integer"}},
                           "required": ["a"]}]}"#,
            "p:object{a:string|integer!}",
        ),
        (
            r#"{"type": "object", "properties": {"a": {}, "b": {}},
                "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}"#,
            "p:object{a: b:}",
        ),
    ];
    for (schema, expected) in cases {
        assert_eq!(shape(&property(schema)), expected, "{schema}");
    }
}

#[test]
fn allof_wrapper_resolves_the_ref_and_keeps_the_outer_description() {
    // pydantic 1.x style: a described field of an enum type.
    let args = params(
        r##"{"title": "Args", "type": "object",
            "properties": {"color": {"title": "Color", "description": "The colour to paint",
                                      "allOf": [{"$ref": "#/definitions/Color"}]}},
            "required": ["color"],
            "definitions": {"Color": {"title": "Color", "description": "An enumeration.",
                                      "enum": ["red", "green"], "type": "string"}}}"##,
    );
    assert_eq!(shapes(&args), ["color:string!(red,green)"]);
    assert_eq!(args[0].description, "The colour to paint");

    let nullable = property(r##"{"allOf": [{"$ref": "#/$defs/Color"}], "nullable": true}"##);
    assert_eq!(shape(&nullable), "p:string|null(red,green)");
    assert_eq!(nullable.description, "Color");
}

#[test]
fn allof_merges_properties_required_and_type() {
    let item = property(
        r##"{"allOf": [
                {"$ref": "#/$defs/Base"},
                {"type": "object", "properties": {"extra": {"type": "boolean"},
                                                  "id": {"description": "The id"}},
                 "required": ["extra"]}],
             "required": ["id"],
             "$comment": "the outer required names a property of a member"}"##
            .replace("#/$defs/Base", "#/properties/p/$defs/Base")
            .replace(
                r#""$comment""#,
                r#""$defs": {"Base": {"type": "object", "properties": {
                    "id": {"type": "string"}, "tags": {"items": {"type": "string"}}}}},
                   "$comment""#,
            )
            .as_str(),
    );
    assert_eq!(
        shape(&item),
        "p:object{id:string! tags:array[:string] extra:boolean!}"
    );
    assert_eq!(get(&item.properties, "id").description, "The id");
    let members = property(r#"{"allOf": [{"type": "integer"}, {"minimum": 0}]}"#);
    assert_eq!(shape(&members), "p:integer");
}

#[test]
fn recursive_refs_terminate() {
    let cases: &[(&str, &[&str])] = &[
        // The root itself.
        (
            r##"{"type": "object", "properties": {"name": {"type": "string"},
                "child": {"$ref": "#", "description": "Same shape"}}}"##,
            &["name:string", "child:object"],
        ),
        // Mutual recursion: A -> B -> A.
        (
            r##"{"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
                "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"},
                                                       "n": {"type": "integer"}}}}}"##,
            &["a:object{b:object{a:object n:integer}}"],
        ),
        // A linked list through a nullable union.
        (
            r##"{"properties": {"list": {"$ref": "#/$defs/L"}}, "$defs": {"L": {
                "type": "object", "properties": {
                    "next": {"anyOf": [{"$ref": "#/$defs/L"}, {"type": "null"}]},
                    "v": {"type": "integer"}}}}}"##,
            &["list:object{next:object|null v:integer}"],
        ),
        // Refs that only refer to each other: nothing is declared at all.
        (
            r##"{"properties": {"p": {"$ref": "#/$defs/X"}}, "$defs": {
                "X": {"$ref": "#/$defs/Y"}, "Y": {"$ref": "#/$defs/X"}}}"##,
            &["p:"],
        ),
        // A recursive ref keeps the type its definition declares, even without `type`.
        (
            r##"{"properties": {"t": {"$ref": "#/$defs/T"}}, "$defs": {"T": {
                "properties": {"kids": {"items": {"$ref": "#/$defs/T"}}}}}}"##,
            &["t:object{kids:array[:object]}"],
        ),
    ];
    for (schema, expected) in cases {
        assert_eq!(shapes(&params(schema)), *expected, "{schema}");
    }
    let root = params(cases[0].0);
    assert_eq!(get(&root, "child").description, "Same shape");
}

#[test]
fn local_pointers_resolve_with_escapes_and_nesting() {
    let all = params(
        r##"{"type": "object", "properties": {
            "slash": {"$ref": "#/$defs/a~1b"},
            "tilde": {"$ref": "#/$defs/c~0d"},
            "both": {"$ref": "#/$defs/e~01f"},
            "nested": {"$ref": "#/$defs/Outer/properties/inner"},
            "indexed": {"$ref": "#/$defs/Pair/prefixItems/1"},
            "sibling": {"$ref": "#/properties/slash"},
            "deep": {"$ref": "#/$defs/Outer/properties/list/items"}
          },
          "$defs": {
            "a/b": {"type": "string"},
            "c~d": {"type": "integer"},
            "e~1f": {"type": "boolean", "description": "tilde-one"},
            "Outer": {"type": "object", "properties": {
                "inner": {"type": "null"},
                "list": {"type": "array", "items": {"enum": ["x"]}}}},
            "Pair": {"prefixItems": [{"type": "string"}, {"type": "number"}]}
          }}"##,
    );
    assert_eq!(
        shapes(&all),
        [
            "slash:string",
            "tilde:integer",
            "both:boolean",
            "nested:null",
            "indexed:number",
            "sibling:string",
            "deep:string(x)"
        ]
    );
    assert_eq!(get(&all, "both").description, "tilde-one");
}

#[test]
fn unresolvable_refs_are_unconstrained() {
    let cases = [
        r##"{"$ref": "#/$defs/Missing"}"##,
        r##"{"$ref": "other.json#/$defs/Str"}"##,
        r##"{"$ref": "#Str"}"##,
        r##"{"$ref": "#/$defs/Str/type"}"##,
        r##"{"$ref": "#/$defs/Color/enum/9"}"##,
        r##"{"$ref": "#/$defs//Str"}"##,
        r##"{"$ref": 5}"##,
    ];
    for schema in cases {
        assert_eq!(shape(&property(schema)), "p:", "{schema}");
    }
    let described = property(r##"{"$ref": "#/$defs/Missing", "description": "kept"}"##);
    assert_eq!(described.description, "kept");
}

#[test]
fn boolean_and_garbage_schemas_give_unconstrained_params() {
    let cases = [
        "true",
        "false",
        "42",
        r#""string""#,
        "null",
        "[]",
        r#"{"type": 5}"#,
        r#"{"enum": "x"}"#,
        r#"{"anyOf": {"type": "string"}}"#,
        r#"{"allOf": "nope"}"#,
        r#"{"oneOf": [1, "two"]}"#,
        r#"{"description": 7, "title": ["x"], "type": [1, null]}"#,
    ];
    for schema in cases {
        let p = property(schema);
        assert_eq!(shape(&p), "p:", "{schema}");
        assert_eq!(p.description, "", "{schema}");
    }
    assert_eq!(
        shape(&property(
            r#"{"type": "object", "properties": 5, "required": "p"}"#
        )),
        "p:object"
    );
    assert_eq!(
        shape(&property(
            r#"{"properties": {"a": 1, "b": true}, "required": [1, "b"]}"#
        )),
        "p:object{a: b:!}"
    );
}

#[test]
fn roots_without_properties_give_no_params() {
    for schema in [
        "{}",
        r#"{"type": "string"}"#,
        r#"{"type": "object", "properties": []}"#,
        r#"{"type": "object"}"#,
    ] {
        assert_eq!(params(schema), [], "{schema}");
    }
}

#[test]
fn root_ref_or_allof_gives_the_referenced_properties() {
    let by_ref = params(
        r##"{"$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object",
            "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}"##,
    );
    assert_eq!(shapes(&by_ref), ["x:integer!"]);
    let by_all_of = params(
        r##"{"allOf": [{"$ref": "#/definitions/A"},
                       {"properties": {"y": {"type": "string"}}}],
            "definitions": {"A": {"properties": {"x": {"type": "integer"}}}},
            "required": ["y"]}"##,
    );
    assert_eq!(shapes(&by_all_of), ["x:integer", "y:string!"]);
}

#[test]
fn properties_keep_schema_order() {
    let names: Vec<String> = params(
        r#"{"properties": {"zeta": {}, "alpha": {}, "mid": {}, "beta": {}},
            "required": ["beta", "zeta"]}"#,
    )
    .into_iter()
    .map(|p| p.name)
    .collect();
    assert_eq!(names, ["zeta", "alpha", "mid", "beta"]);
}

#[test]
fn description_is_preferred_to_title() {
    let cases = [
        (r#"{"description": "d", "title": "t"}"#, "d"),
        (r#"{"title": "t"}"#, "t"),
        (r#"{"description": "", "title": "t"}"#, "t"),
        ("{}", ""),
    ];
    for (schema, expected) in cases {
        assert_eq!(property(schema).description, expected, "{schema}");
    }
}

#[test]
fn depth_is_capped() {
    let mut schema = r#"{"type": "string"}"#.to_owned();
    for _ in 0..60 {
        schema = format!(r#"{{"type": "object", "properties": {{"n": {schema}}}}}"#);
    }
    let mut level = params(&schema);
    let mut depth = 0;
    while let [only] = level.as_slice() {
        depth += 1;
        assert_eq!(only.r#type, "object");
        level = only.properties.clone();
    }
    assert!(level.is_empty());
    assert_eq!(depth, MAX_DEPTH);
}

#[test]
fn refs_fanning_out_are_capped() {
    // D0 -> D1 twice -> D2 twice ...: 2^40 expansions without a cap.
    let defs: Vec<String> = (0..40)
        .map(|i| {
            let next = format!(r##"{{"$ref": "#/$defs/D{}"}}"##, i + 1);
            format!(r#""D{i}": {{"type": "object", "properties": {{"l": {next}, "r": {next}}}}}"#)
        })
        .collect();
    let schema = format!(
        r##"{{"properties": {{"d": {{"$ref": "#/$defs/D0"}}}},
             "$defs": {{{}, "D40": {{"type": "string"}}}}}}"##,
        defs.join(", ")
    );
    let all = params(&schema);
    assert_eq!(shapes(&all[0].properties[0].properties).len(), 2);
    assert!(count(&all) <= MAX_NODES, "{}", count(&all));
}
