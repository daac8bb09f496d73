"""The association graph on Neo4j, or any server speaking Bolt and Cypher (extra `[neo4j]`)."""

from .graph import Neo4jAssociationGraph

__all__ = ["Neo4jAssociationGraph"]
