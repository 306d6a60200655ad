{#- The few things SQL dialects spell differently, each behind one macro: a default that
    DuckDB and PostgreSQL run, and the spelling of Snowflake and BigQuery where theirs differs.
    Everything else in the models is SQL:2003 (CTEs, joins, CASE, window functions with
    row_number, aggregates), which every warehouse dbt supports runs as it is. -#}

{#- `d` shifted by `n` whole days, as a date. -#}
{% macro days_after(d, n) -%}
  {{ return(adapter.dispatch('days_after', 'docpipe_trends')(d, n)) }}
{%- endmacro %}
{% macro default__days_after(d, n) -%}
  cast({{ dbt.dateadd('day', n, d) }} as date)
{%- endmacro %}

{#- Whole days from `a` to `b` (b - a). -#}
{% macro days_between(a, b) -%}
  {{ dbt.datediff(a, b, 'day') }}
{%- endmacro %}

{#- The Monday of the ISO week of date `d`. -#}
{% macro week_start(d) -%}
  {{ return(adapter.dispatch('week_start', 'docpipe_trends')(d)) }}
{%- endmacro %}
{% macro default__week_start(d) -%}
  cast(date_trunc('week', {{ d }}) as date)
{%- endmacro %}
{% macro bigquery__week_start(d) -%}
  date_trunc({{ d }}, isoweek)
{%- endmacro %}

{#- The ISO year and ISO week number of date `d`. -#}
{% macro iso_year(d) -%}
  {{ return(adapter.dispatch('iso_year', 'docpipe_trends')(d)) }}
{%- endmacro %}
{% macro default__iso_year(d) -%}
  cast(extract(isoyear from {{ d }}) as {{ dbt.type_bigint() }})
{%- endmacro %}
{% macro snowflake__iso_year(d) -%}
  cast(yearofweekiso({{ d }}) as {{ dbt.type_bigint() }})
{%- endmacro %}
{% macro iso_week(d) -%}
  {{ return(adapter.dispatch('iso_week', 'docpipe_trends')(d)) }}
{%- endmacro %}
{% macro default__iso_week(d) -%}
  cast(extract(week from {{ d }}) as {{ dbt.type_bigint() }})
{%- endmacro %}
{% macro snowflake__iso_week(d) -%}
  cast(weekiso({{ d }}) as {{ dbt.type_bigint() }})
{%- endmacro %}
{% macro bigquery__iso_week(d) -%}
  cast(extract(isoweek from {{ d }}) as {{ dbt.type_bigint() }})
{%- endmacro %}

{#- A 64-bit float (dbt's type_float is 32 bits on DuckDB). -#}
{% macro double() -%}
  {{ return(adapter.dispatch('double', 'docpipe_trends')()) }}
{%- endmacro %}
{% macro default__double() -%}
  double precision
{%- endmacro %}
{% macro bigquery__double() -%}
  float64
{%- endmacro %}

{#- `a / b` as a float, null where `b` is zero or null. -#}
{% macro share(a, b) -%}
  case when ({{ b }}) > 0 then cast({{ a }} as {{ double() }}) / ({{ b }}) end
{%- endmacro %}

{#- `now / before - 1`, null where `before` is zero or null. -#}
{% macro change(now, before) -%}
  case when ({{ before }}) > 0 then cast({{ now }} as {{ double() }}) / ({{ before }}) - 1 end
{%- endmacro %}

{#- A sum as a whole number of the warehouse's 64-bit type (PostgreSQL sums bigints as
    numeric). -#}
{% macro total(e) -%}
  cast(sum({{ e }}) as {{ dbt.type_bigint() }})
{%- endmacro %}

{#- Whether `condition` holds on every row (`all`) or on one (`any`) of a group. -#}
{% macro every(condition) -%}
  (min(case when {{ condition }} then 1 else 0 end) = 1)
{%- endmacro %}
{% macro some(condition) -%}
  (max(case when {{ condition }} then 1 else 0 end) = 1)
{%- endmacro %}

{#- A sum of estimated clicks as the whole number it estimates, as docpipe rounds it: to a
    millionth first (sums in another order differ in the last bits), then half away from zero,
    in exact decimals. -#}
{% macro whole(e) -%}
  cast(round(round(cast({{ e }} as decimal(38, 9)), 6), 0) as {{ dbt.type_bigint() }})
{%- endmacro %}

{#- A question's text for grouping, as docpipe normalises it: lower case, every run of what is
    not a letter or a digit one space, trimmed. -#}
{% macro normalised(e) -%}
  {{ return(adapter.dispatch('normalised', 'docpipe_trends')(e)) }}
{%- endmacro %}
{% macro default__normalised(e) -%}
  trim(regexp_replace(lower({{ e }}), '[^[:alnum:]]+', ' ', 'g'))
{%- endmacro %}
{% macro duckdb__normalised(e) -%}
  trim(regexp_replace(lower({{ e }}), '[^\p{L}\p{N}]+', ' ', 'g'))
{%- endmacro %}
{% macro snowflake__normalised(e) -%}
  trim(regexp_replace(lower({{ e }}), '[^[:alnum:]]+', ' '))
{%- endmacro %}
{% macro bigquery__normalised(e) -%}
  trim(regexp_replace(lower({{ e }}), r'[^\p{L}\p{N}]+', ' '))
{%- endmacro %}

{#- The days a dataset's `day_status` says are partial (not over, or fetched before they
    ended): `project`, `date`. -#}
{% macro partial_days(dataset) -%}
  select distinct project, date
  from {{ source('docpipe', 'day_status') }}
  where dataset = '{{ dataset }}' and status = 'partial'
{%- endmacro %}

{#- One row per page an assistant turn cited: the turns' `project`, `question` and each cited
    `url` (a turn's `sources` is a list of {title, url}: a list in the lake, JSON in the
    warehouse). -#}
{% macro cited_urls(turns) -%}
  {{ return(adapter.dispatch('cited_urls', 'docpipe_trends')(turns)) }}
{%- endmacro %}
{% macro default__cited_urls(turns) -%}
  select t.project, t.question, s.value ->> 'url' as url
  from {{ turns }} as t
  cross join lateral jsonb_array_elements(t.sources) as s
{%- endmacro %}
{% macro duckdb__cited_urls(turns) -%}
  select project, question, source.url as url
  from (select project, question, unnest(sources) as source from {{ turns }}) as t
{%- endmacro %}
{% macro snowflake__cited_urls(turns) -%}
  select t.project, t.question, s.value:url::string as url
  from {{ turns }} as t, lateral flatten(input => t.sources) as s
{%- endmacro %}
{% macro bigquery__cited_urls(turns) -%}
  select t.project, t.question, s.url as url
  from {{ turns }} as t cross join unnest(t.sources) as s
{%- endmacro %}

{#- The rows of `src` with `complete`: false on the days `dataset`'s `day_status` says are
    partial, true on the others (and on every day of a lake without `day_status` rows). -#}
{% macro marked(src, dataset) -%}
  select s.*, p.date is null as complete
  from {{ src }} as s
  left join ({{ partial_days(dataset) }}) as p
      on p.project = s.project and p.date = s.date
{%- endmacro %}

{#- The rows of `src` on the days complete for `dataset`, with `complete`. -#}
{% macro complete_rows(src, dataset) -%}
  select * from ({{ marked(src, dataset) }}) as m where complete
{%- endmacro %}

{#- Rows of `src` on the days complete for `dataset`, with `last_day` (their project's last
    such day) and `age` (days before it), kept when `age` is under `within`. -#}
{% macro aged(src, dataset, within) -%}
  select r.*, l.last_day, {{ days_between('r.date', 'l.last_day') }} as age
  from ({{ complete_rows(src, dataset) }}) as r
  inner join (
      select project, max(date) as last_day
      from ({{ complete_rows(src, dataset) }}) as c
      group by project
  ) as l on l.project = r.project
  where {{ days_between('r.date', 'l.last_day') }} < {{ within }}
{%- endmacro %}

{#- The ISO week's columns of a query grouped by `project` and the week of `date`: its
    Monday, ISO year and week, and the days of it in the group. -#}
{% macro iso_week_columns() -%}
  {{ week_start('date') }} as week_start,
  min({{ iso_year('date') }}) as iso_year,
  min({{ iso_week('date') }}) as iso_week,
  cast(count(*) as {{ dbt.type_bigint() }}) as days
{%- endmacro %}

{#- Databricks' spellings. -#}
{% macro databricks__double() -%}
  double
{%- endmacro %}
{% macro databricks__iso_year(d) -%}
  cast(extract(yearofweek from {{ d }}) as {{ dbt.type_bigint() }})
{%- endmacro %}
{% macro databricks__normalised(e) -%}
  trim(regexp_replace(lower({{ e }}), '[^\\p{L}\\p{N}]+', ' '))
{%- endmacro %}
{% macro databricks__cited_urls(turns) -%}
  select t.project, t.question, s.url as url
  from {{ turns }} as t lateral view explode(t.sources) x as s
{%- endmacro %}
