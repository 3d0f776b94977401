//! `template.yaml` as data, and an evaluator for the intrinsic functions it uses.
//!
//! The YAML's short-form tags become CloudFormation's long forms (`!Ref X` ->
//! `{"Ref": "X"}`, `!GetAtt A.B` -> `{"Fn::GetAtt": ["A", "B"]}`, `!Sub s` ->
//! `{"Fn::Sub": s}`, ...), so everything downstream is plain JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Map, Value};

/// The template, in long form.
#[derive(Debug, Clone)]
pub struct Template {
    pub path: PathBuf,
    pub doc: Value,
}

fn yaml_to_json(value: serde_yaml::Value) -> Result<Value> {
    use serde_yaml::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                json!(i)
            } else if let Some(u) = n.as_u64() {
                json!(u)
            } else {
                json!(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(yaml_to_json).collect::<Result<_>>()?),
        Y::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => bail!("unsupported mapping key {other:?}"),
                };
                out.insert(key, yaml_to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => {
            let name = tagged.tag.to_string();
            let name = name.trim_start_matches('!').to_string();
            let inner = yaml_to_json(tagged.value)?;
            match name.as_str() {
                "Ref" | "Condition" => json!({ name: inner }),
                "GetAtt" => {
                    let parts = match inner {
                        Value::String(s) => {
                            let (resource, attribute) = s
                                .split_once('.')
                                .ok_or_else(|| anyhow!("!GetAtt {s}: expected Resource.Attribute"))?;
                            json!([resource, attribute])
                        }
                        other => other,
                    };
                    json!({ "Fn::GetAtt": parts })
                }
                other => json!({ format!("Fn::{other}"): inner }),
            }
        }
    })
}

impl Template {
    /// Read and convert a template file.
    pub fn load(path: impl AsRef<Path>) -> Result<Template> {
        let path = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let yaml: serde_yaml::Value =
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(Template {
            doc: yaml_to_json(yaml)?,
            path,
        })
    }

    /// The repository's `template.yaml`.
    ///
    /// # Panics
    /// When it cannot be read or parsed.
    pub fn repo() -> Template {
        let path = crate::repo_root().join("template.yaml");
        Template::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()))
    }

    /// The folder the template is in (relative `CodeUri`/`ContentUri` resolve from it).
    pub fn dir(&self) -> PathBuf {
        self.path.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    pub fn resources(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.doc["Resources"]
            .as_object()
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }

    /// A resource by logical id.
    pub fn resource(&self, id: &str) -> Result<&Value> {
        self.resources()
            .get(id)
            .ok_or_else(|| anyhow!("template.yaml has no resource {id}"))
    }

    /// A resource's `Properties`.
    pub fn properties(&self, id: &str) -> Result<&Value> {
        Ok(&self.resource(id)?["Properties"])
    }

    /// The logical ids of every resource of type `ty`, in template order.
    pub fn of_type(&self, ty: &str) -> Vec<String> {
        self.resources()
            .iter()
            .filter(|(_, r)| r["Type"] == ty)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Each parameter's default, as CloudFormation passes it (a string).
    pub fn parameter_defaults(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        if let Some(params) = self.doc["Parameters"].as_object() {
            for (name, p) in params {
                let value = match &p["Default"] {
                    Value::String(s) => s.clone(),
                    Value::Null => continue,
                    other => other.to_string(),
                };
                out.insert(name.clone(), value);
            }
        }
        out
    }

    /// A property of a function, with the `Globals.Function` value as the fallback.
    pub fn function_property<'a>(&'a self, function: &str, name: &str) -> Result<&'a Value> {
        let own = &self.properties(function)?[name];
        Ok(if own.is_null() {
            &self.doc["Globals"]["Function"][name]
        } else {
            own
        })
    }
}

/// Evaluates intrinsic functions against parameter values and the physical values of the
/// resources a test created (a queue URL, ...).
#[derive(Debug, Clone)]
pub struct Resolver<'a> {
    pub template: &'a Template,
    pub parameters: BTreeMap<String, String>,
    /// Logical id -> what `Ref` returns for it.
    pub refs: BTreeMap<String, String>,
    /// `Logical.Attribute` -> what `Fn::GetAtt` returns.
    pub attributes: BTreeMap<String, String>,
    pub stack_name: String,
    /// The UUID at the end of `AWS::StackId` (`arn:...:stack/{stack_name}/{stack_uuid}`).
    pub stack_uuid: String,
    pub region: String,
    /// A `Ref` or `GetAtt` of a resource with no value in [`Resolver::refs`] /
    /// [`Resolver::attributes`] gives a placeholder (`{Id}`, `{Id.Attribute}`) instead of an
    /// error: for evaluating a whole template ([`Resolver::with_placeholders`]).
    pub placeholders: bool,
}

impl<'a> Resolver<'a> {
    /// The template's parameter defaults, overridden by `overrides`.
    pub fn new(template: &'a Template, overrides: &[(&str, &str)]) -> Self {
        let mut parameters = template.parameter_defaults();
        for (k, v) in overrides {
            parameters.insert((*k).to_string(), (*v).to_string());
        }
        Resolver {
            template,
            parameters,
            refs: BTreeMap::new(),
            attributes: BTreeMap::new(),
            stack_name: "stm".into(),
            stack_uuid: "51af3dc0-da77-11e4-872e-1234567db123".into(),
            region: "us-east-1".into(),
            placeholders: false,
        }
    }

    /// Every resource's `Ref` and `GetAtt` not given otherwise resolves to a placeholder
    /// (`{Id}`, `{Id.Attribute}`); a reference to a resource the stack does not create (its
    /// `Condition` false) still fails, as CloudFormation refuses it.
    pub fn with_placeholders(mut self) -> Self {
        self.placeholders = true;
        self
    }

    /// Each table's `Arn` as CloudFormation returns it:
    /// `arn:aws:dynamodb:{region}:123456789012:table/{TableName}`.
    pub fn with_table_arns(mut self) -> Self {
        for (id, name) in self.tables_named() {
            let arn = format!("arn:aws:dynamodb:{}:123456789012:table/{name}", self.region);
            self.attributes.insert(format!("{id}.Arn"), arn);
        }
        self
    }

    /// Each `AWS::DynamoDB::Table`'s logical id and its `TableName` as evaluated with these
    /// parameters (a table whose name does not evaluate is left out).
    fn tables_named(&self) -> Vec<(String, String)> {
        self.template
            .of_type("AWS::DynamoDB::Table")
            .into_iter()
            .filter_map(|id| {
                let name = self
                    .template
                    .properties(&id)
                    .and_then(|p| self.string(&p["TableName"]))
                    .ok()?;
                Some((id, name))
            })
            .collect()
    }

    /// Whether the stack creates resource `id`: it has no `Condition`, or its condition holds.
    /// (An id that is not a resource is `true`: parameters and pseudo parameters.)
    pub fn created(&self, id: &str) -> Result<bool> {
        let Some(resource) = self.template.resources().get(id) else {
            return Ok(true);
        };
        match &resource["Condition"] {
            Value::Null => Ok(true),
            Value::String(condition) => self.condition(condition),
            other => bail!("{id}: Condition {other} is not a condition name"),
        }
    }

    /// A reference to `id`, refused when the stack does not create it.
    fn check_created(&self, id: &str) -> Result<()> {
        if !self.created(id)? {
            bail!(
                "a reference to {id}, which the stack does not create (its Condition {} is false)",
                self.template.resources()[id]["Condition"]
            );
        }
        Ok(())
    }

    pub fn with_ref(mut self, logical: &str, value: impl Into<String>) -> Self {
        self.refs.insert(logical.to_string(), value.into());
        self
    }

    /// Each table's `Ref` as CloudFormation returns it: the table's name (its `TableName`
    /// evaluated with these parameters).
    pub fn with_table_refs(mut self) -> Self {
        for (id, name) in self.tables_named() {
            self.refs.insert(id, name);
        }
        self
    }

    /// A `Ref` CloudFormation answers with the resource's own name, evaluated with these
    /// parameters: an event bus's `Name`.
    fn named_ref(&self, id: &str) -> Option<String> {
        let resource = self.template.resources().get(id)?;
        if resource["Type"] != "AWS::Events::EventBus" {
            return None;
        }
        self.string(&resource["Properties"]["Name"]).ok()
    }

    fn name(&self, name: &str) -> Result<String> {
        if let Some((resource, attribute)) = name.split_once('.') {
            if !name.starts_with("AWS::") {
                self.check_created(resource)?;
                return match self.attributes.get(name) {
                    Some(v) => Ok(v.clone()),
                    None if self.placeholders && self.template.resources().contains_key(resource) => {
                        Ok(format!("{{{name}}}"))
                    }
                    None => Err(anyhow!(
                        "no value for {resource}.{attribute} (Resolver::attributes)"
                    )),
                };
            }
        }
        Ok(match name {
            "AWS::StackName" => self.stack_name.clone(),
            "AWS::StackId" => format!(
                "arn:aws:cloudformation:{}:123456789012:stack/{}/{}",
                self.region, self.stack_name, self.stack_uuid
            ),
            "AWS::Region" => self.region.clone(),
            "AWS::Partition" => "aws".into(),
            "AWS::AccountId" => "123456789012".into(),
            "AWS::URLSuffix" => "amazonaws.com".into(),
            other => match self.parameters.get(other) {
                Some(v) => v.clone(),
                None => {
                    self.check_created(other)?;
                    match self.refs.get(other).cloned().or_else(|| self.named_ref(other)) {
                        Some(v) => v,
                        None if self.placeholders && self.template.resources().contains_key(other) => {
                            format!("{{{other}}}")
                        }
                        None => {
                            bail!("no value for Ref {other} (a parameter without default, or a resource)")
                        }
                    }
                }
            },
        })
    }

    /// A list argument (`Fn::Join`'s, `Fn::Select`'s): a literal list evaluated item by
    /// item, or an intrinsic that gives one (`Fn::Split`; a list parameter's `Ref`, which
    /// this resolver holds comma-separated).
    fn list(&self, v: &Value) -> Result<Vec<String>> {
        let items = match v {
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    if self.eval(item)?.is_some() {
                        out.push(self.string(item)?);
                    }
                }
                return Ok(out);
            }
            other => self.eval(other)?,
        };
        match items {
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Ok(s.clone()),
                    other => Ok(other.to_string()),
                })
                .collect(),
            Some(Value::String(s)) => Ok(s.split(',').map(str::to_string).collect()),
            None => Ok(Vec::new()),
            Some(other) => bail!("{v} is not a list: {other}"),
        }
    }

    /// `Fn::Sub` on a string.
    fn sub(&self, text: &str) -> Result<String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| anyhow!("unclosed ${{ in {text:?}"))?;
            let name = &after[..end];
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str("${");
                out.push_str(literal);
                out.push('}');
            } else {
                out.push_str(&self.name(name)?);
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A named condition's value.
    pub fn condition(&self, name: &str) -> Result<bool> {
        let body = &self.template.doc["Conditions"][name];
        if body.is_null() {
            bail!("no condition {name}");
        }
        self.truth(body)
    }

    fn truth(&self, v: &Value) -> Result<bool> {
        let Some((key, arg)) = single(v) else {
            bail!("not a condition: {v}")
        };
        match key {
            "Fn::Equals" => {
                let a = self.string(&arg[0])?;
                let b = self.string(&arg[1])?;
                Ok(a == b)
            }
            "Fn::Not" => Ok(!self.truth(&arg[0])?),
            "Fn::And" => {
                for c in arg.as_array().into_iter().flatten() {
                    if !self.truth(c)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            "Fn::Or" => {
                for c in arg.as_array().into_iter().flatten() {
                    if self.truth(c)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            "Condition" => self.condition(arg.as_str().unwrap_or_default()),
            other => bail!("unsupported condition function {other}"),
        }
    }

    /// Evaluate `v`; `None` is `AWS::NoValue` (the property is absent).
    pub fn eval(&self, v: &Value) -> Result<Option<Value>> {
        if let Some((key, arg)) = single(v) {
            match key {
                "Ref" => {
                    let name = arg.as_str().unwrap_or_default();
                    if name == "AWS::NoValue" {
                        return Ok(None);
                    }
                    return Ok(Some(Value::String(self.name(name)?)));
                }
                "Fn::Sub" => {
                    let text = match arg {
                        Value::String(s) => s.clone(),
                        Value::Array(parts) if parts.len() == 2 => {
                            let mut scoped = self.clone();
                            if let Some(vars) = parts[1].as_object() {
                                for (k, var) in vars {
                                    scoped.parameters.insert(k.clone(), scoped.string(var)?);
                                }
                            }
                            return Ok(Some(Value::String(
                                scoped.sub(parts[0].as_str().unwrap_or_default())?,
                            )));
                        }
                        other => bail!("unsupported Fn::Sub {other}"),
                    };
                    return Ok(Some(Value::String(self.sub(&text)?)));
                }
                "Fn::GetAtt" => {
                    let resource = arg[0].as_str().unwrap_or_default();
                    let attribute = arg[1].as_str().unwrap_or_default();
                    return Ok(Some(Value::String(
                        self.name(&format!("{resource}.{attribute}"))?,
                    )));
                }
                "Fn::If" => {
                    let cond = arg[0].as_str().unwrap_or_default();
                    let branch = if self.condition(cond)? { &arg[1] } else { &arg[2] };
                    return self.eval(branch);
                }
                "Fn::Join" => {
                    let sep = arg[0].as_str().unwrap_or_default();
                    return Ok(Some(Value::String(self.list(&arg[1])?.join(sep))));
                }
                "Fn::Split" => {
                    let sep = arg[0]
                        .as_str()
                        .ok_or_else(|| anyhow!("Fn::Split: the delimiter must be a string: {arg}"))?;
                    let text = self.string(&arg[1])?;
                    return Ok(Some(Value::Array(
                        text.split(sep).map(|s| Value::String(s.to_string())).collect(),
                    )));
                }
                "Fn::Select" => {
                    let index: usize = self
                        .string(&arg[0])?
                        .parse()
                        .map_err(|e| anyhow!("Fn::Select: index {}: {e}", arg[0]))?;
                    let items = self.list(&arg[1])?;
                    let item = items
                        .get(index)
                        .ok_or_else(|| anyhow!("Fn::Select: no item {index} in {items:?}"))?;
                    return Ok(Some(Value::String(item.clone())));
                }
                _ if key.starts_with("Fn::") => bail!("unsupported intrinsic {key}"),
                _ => {}
            }
        }
        Ok(Some(match v {
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    if let Some(x) = self.eval(item)? {
                        out.push(x);
                    }
                }
                Value::Array(out)
            }
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, item) in map {
                    if let Some(x) = self.eval(item)? {
                        out.insert(k.clone(), x);
                    }
                }
                Value::Object(out)
            }
            other => other.clone(),
        }))
    }

    /// Evaluate `v` to a string (numbers and booleans as CloudFormation passes them).
    pub fn string(&self, v: &Value) -> Result<String> {
        match self.eval(v)? {
            Some(Value::String(s)) => Ok(s),
            Some(Value::Number(n)) => Ok(n.to_string()),
            Some(Value::Bool(b)) => Ok(b.to_string()),
            other => bail!("{v} is not a scalar: {other:?}"),
        }
    }

    /// A function's environment variables as Lambda would set them.
    pub fn environment(&self, function: &str) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let sources = [
            &self.template.doc["Globals"]["Function"]["Environment"]["Variables"],
            &self.template.properties(function)?["Environment"]["Variables"],
        ];
        for vars in sources {
            if let Some(vars) = vars.as_object() {
                for (k, v) in vars {
                    if self.eval(v)?.is_some() {
                        out.insert(k.clone(), self.string(v)?);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Each `AWS::DynamoDB::Table`'s physical name -> its logical id.
    pub fn table_names(&self) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for id in self.template.of_type("AWS::DynamoDB::Table") {
            let name = self.string(&self.template.properties(&id)?["TableName"])?;
            out.insert(name, id);
        }
        Ok(out)
    }
}

/// `{"Key": arg}` -> `(Key, arg)`.
pub fn single(v: &Value) -> Option<(&str, &Value)> {
    let map = v.as_object()?;
    if map.len() != 1 {
        return None;
    }
    map.iter().next().map(|(k, v)| (k.as_str(), v))
}

/// The logical id a `!Ref X` or `!GetAtt X.Attr` points at.
pub fn referenced(v: &Value) -> Option<String> {
    match single(v)? {
        ("Ref", Value::String(id)) => Some(id.clone()),
        ("Fn::GetAtt", Value::Array(parts)) => parts.first().and_then(Value::as_str).map(str::to_string),
        _ => None,
    }
}
