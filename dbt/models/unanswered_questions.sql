-- One unanswered question (its normalised text) of the last 7 complete days, to its project's
-- last day with turns: how often asked, in how many conversations, the latest wording, when
-- last asked, and the pages the assistant cited for it (most cited first, then by address, up
-- to 5); rank 1 for the most asked, then the latest asked, then by text.
with asked as (
    select *
    from (
        select t.*, {{ normalised('t.query') }} as question
        from ({{ aged(source('docpipe', 'assistant_turns'), 'assistant', 7) }}) as t
        where t.resolution_status = 'unanswered'
    ) as q
    where question <> ''
),

cited as (
    select project, question, url, count(*) as n
    from ({{ cited_urls('asked') }}) as u
    where url is not null
    group by project, question, url
),

cited_pages as (
    select
        project,
        question,
        cast(count(*) as {{ dbt.type_bigint() }}) as cited_count,
        {{ dbt.listagg('url', "' | '", 'order by n desc, url', 5) }} as cited_pages
    from cited
    group by project, question
),

latest as (
    select project, question, query as latest_wording
    from (
        select
            project,
            question,
            query,
            row_number() over (
                partition by project, question order by {{ adapter.quote('timestamp') }} desc, query desc
            ) as n
        from asked
    ) as ordered
    where n = 1
),

grouped as (
    select
        project,
        question,
        min(last_day) as last_day,
        cast(count(*) as {{ dbt.type_bigint() }}) as asks,
        cast(count(distinct id) as {{ dbt.type_bigint() }}) as conversations,
        max({{ adapter.quote('timestamp') }}) as last_asked_at
    from asked
    group by project, question
)

select
    g.project,
    cast(row_number() over (
        partition by g.project order by g.asks desc, g.last_asked_at desc, g.question
    ) as {{ dbt.type_bigint() }}) as {{ adapter.quote('rank') }},
    g.question,
    l.latest_wording,
    g.asks,
    g.conversations,
    g.last_asked_at,
    coalesce(c.cited_count, 0) as cited_count,
    c.cited_pages,
    g.last_day
from grouped as g
inner join latest as l on l.project = g.project and l.question = g.question
left join cited_pages as c on c.project = g.project and c.question = g.question
